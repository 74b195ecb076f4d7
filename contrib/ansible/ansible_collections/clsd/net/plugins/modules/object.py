#!/usr/bin/python3
# clsd.net.object: a BPF object stored in clsd (POST /objects), by its file.

DOCUMENTATION = r"""
module: object
short_description: Store a BPF object in clsd
description:
  - Uploads a BPF ELF object to clsd unless clsd has it already (its sha256 digest), with its minisign
    or signify signature when clsd runs with --trusted-keys; or removes a stored object.
options:
  path:
    description: The object file (on the host that runs the module). Its digest is returned.
    type: path
  digest:
    description: For state=absent, the object's digest instead of its file.
    type: str
  signature:
    description: The signature file; default PATH.minisig or PATH.sig when there is one.
    type: path
  state:
    type: str
    choices: [present, absent]
    default: present
extends_documentation_fragment: []
"""

RETURN = r"""
digest:
  description: The object's digest, to name it in documents and policies.
  type: str
  returned: always
"""

import base64
import hashlib
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.clsd.net.plugins.module_utils.clsd import CONNECTION_ARGS, Clsd, ClsdError


def main():
    module = AnsibleModule(
        argument_spec=dict(CONNECTION_ARGS, path=dict(type="path"), digest=dict(type="str"),
                           signature=dict(type="path"), state=dict(type="str", default="present",
                                                                   choices=["present", "absent"])),
        required_one_of=[("path", "digest")],
        supports_check_mode=True,
    )
    p = module.params
    clsd = Clsd(p)
    data = None
    if p["path"]:
        try:
            with open(p["path"], "rb") as f:
                data = f.read()
        except OSError as e:
            module.fail_json(msg="%s: %s" % (p["path"], e.strerror))
    digest = p["digest"] or "sha256:" + hashlib.sha256(data).hexdigest()
    try:
        present = clsd.get_or_none("/objects/" + digest) is not None
        if p["state"] == "absent":
            if present and not module.check_mode:
                clsd.request("DELETE", "/objects/" + digest)
            module.exit_json(changed=present, digest=digest)
        if present:
            module.exit_json(changed=False, digest=digest)
        if data is None:
            module.fail_json(msg="clsd has no object %s; give its path" % digest, digest=digest)
        headers = {}
        sig = p["signature"] or next((p["path"] + s for s in (".minisig", ".sig") if os.path.exists(p["path"] + s)),
                                     None)
        if sig:
            with open(sig, "rb") as f:
                headers["Clsd-Signature"] = base64.b64encode(f.read()).decode()
        if not module.check_mode:
            clsd.request("POST", "/objects", body=data, content_type="application/octet-stream", headers=headers)
        module.exit_json(changed=True, digest=digest)
    except ClsdError as e:
        module.fail_json(msg=str(e), status=e.status, code=e.code, digest=digest)


if __name__ == "__main__":
    main()
