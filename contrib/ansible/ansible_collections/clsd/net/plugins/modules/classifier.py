#!/usr/bin/python3
# clsd.net.classifier: an interface's classifier document (PUT /ifaces/IFNAME/classifier).

DOCUMENTATION = r"""
module: classifier
short_description: Declare the classifier document of an interface in clsd
description:
  - Makes the document of an interface what is given (ingress and egress filters, as clsd's API takes
    them). clsd is asked for a dry run first; the module reports changed only if the dry run says the
    document or the attached filters would change. Check mode stops after the dry run; diff mode shows
    the document before and after.
options:
  ifname:
    description: The interface.
    type: str
    required: true
  netns:
    description: A named network namespace (/run/netns/NAME) the interface is in.
    type: str
  document:
    description: The document (ingress, egress); objects by digest or by path under clsd's object directories.
    type: dict
  state:
    type: str
    choices: [present, absent]
    default: present
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.clsd.net.plugins.module_utils.clsd import CONNECTION_ARGS, Clsd, ClsdError, pretty, quote


def own_document(current):
    """The interface's own document out of GET's, which shows each hook's filters whoever declared them
    (a hog, the document, a policy): the filters whose status says "api". None when it has none (GET's
    "source" names the hook's owner of the interface as a whole, a hog when there is one: not enough)."""
    if not current:
        return None
    doc = current["document"]
    status = current.get("status") or {}
    own, found = {}, current.get("source") == "api"
    for hook in ("ingress", "egress"):
        st = status.get(hook) or []
        if st:
            names = {f.get("name") for f in st if f.get("source") == "api"}
            own[hook] = [f for f in doc.get(hook, []) if f["name"] in names]
        else:
            # a hook without status (the interface is not there yet) is the document's when it is the API's
            own[hook] = doc.get(hook, []) if current.get("source") == "api" else []
        found = found or bool(own[hook])
    return own if found else None


def main():
    module = AnsibleModule(
        argument_spec=dict(CONNECTION_ARGS, ifname=dict(type="str", required=True), netns=dict(type="str"),
                           document=dict(type="dict"),
                           state=dict(type="str", default="present", choices=["present", "absent"])),
        required_if=[("state", "present", ("document",))],
        supports_check_mode=True,
    )
    p = module.params
    clsd = Clsd(p)
    path = ("/netns/%s" % quote(p["netns"]) if p["netns"] else "") + "/ifaces/%s/classifier" % quote(p["ifname"])
    try:
        current = clsd.get_or_none(path)
        before = own_document(current)
        if p["state"] == "absent":
            # only the interface's own document goes: hooks a hog or a policy holds are not the module's
            if before is not None and not module.check_mode:
                clsd.request("DELETE", path)
            module.exit_json(changed=before is not None, diff=dict(before=pretty(before), after=""))
        _, plan = clsd.request("PUT", path + "?dry_run=1", body=p["document"])
        # clsd says whether the document or the kernel would change (GET's document is the effective
        # one, with a policy's or a hog's hooks; the dry run's is this interface's own)
        changed = plan["changed"]
        result = dict(changed=changed, plan=plan, diff=dict(before=pretty(before), after=pretty(plan["document"])))
        if changed and not module.check_mode:
            _, answer = clsd.request("PUT", path, body=p["document"])
            result["state"], result["generation"] = answer.get("state"), answer.get("generation")
        module.exit_json(**result)
    except ClsdError as e:
        module.fail_json(msg=str(e), status=e.status, code=e.code)


if __name__ == "__main__":
    main()
