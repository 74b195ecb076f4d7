#!/usr/bin/python3
# clsd.net.policy: a policy, one document for every interface it matches (PUT /policies/NAME).

DOCUMENTATION = r"""
module: policy
short_description: Declare a clsd policy
description:
  - Makes policy NAME what is given (match, order, ingress, egress). clsd is asked for a dry run
    first; the module reports changed only if the dry run says the policy or any interface it matches
    (or matched) would change. Check mode stops after the dry run; diff mode shows the policy before
    and after.
options:
  name:
    type: str
    required: true
  policy:
    description: The policy (match, order, ingress, egress).
    type: dict
  state:
    type: str
    choices: [present, absent]
    default: present
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.clsd.net.plugins.module_utils.clsd import CONNECTION_ARGS, Clsd, ClsdError, pretty, quote

FIELDS = ("match", "order", "ingress", "egress")


def main():
    module = AnsibleModule(
        argument_spec=dict(CONNECTION_ARGS, name=dict(type="str", required=True), policy=dict(type="dict"),
                           state=dict(type="str", default="present", choices=["present", "absent"])),
        required_if=[("state", "present", ("policy",))],
        supports_check_mode=True,
    )
    p = module.params
    clsd = Clsd(p)
    path = "/policies/" + quote(p["name"])
    try:
        current = clsd.get_or_none(path)
        before = {k: current.get(k) for k in FIELDS} if current else None
        if p["state"] == "absent":
            if current and not module.check_mode:
                clsd.request("DELETE", path)
            module.exit_json(changed=current is not None, diff=dict(before=pretty(before), after=""))
        _, plan = clsd.request("PUT", path + "?dry_run=1", body=p["policy"])
        after = {k: plan.get(k) for k in FIELDS}
        changed = plan["changed"]  # the stored policy or an interface would change
        result = dict(changed=changed, plan=plan, diff=dict(before=pretty(before), after=pretty(after)))
        if changed and not module.check_mode:
            _, answer = clsd.request("PUT", path, body=p["policy"])
            result["results"] = answer.get("results")
        module.exit_json(**result)
    except ClsdError as e:
        module.fail_json(msg=str(e), status=e.status, code=e.code)


if __name__ == "__main__":
    main()
