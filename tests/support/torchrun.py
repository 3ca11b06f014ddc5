# torchrun (torch.distributed.run) for ember's tests, with one fix: Debian's torch 1.13 under
# Python 3.11 fails before starting any worker, because Std.from_str (the parser of
# --redirects and --tee) looks the value up by iterating over the Std Flag enum, and since
# Python 3.11 that iteration no longer yields the zero member NONE (nor the composite ALL), so
# it returns None for the default "0" and torchrun dies in Std.to_map. Where from_str works
# (other torch or Python versions) nothing is patched. Usage: python3 torchrun.py ARGS...
# (exactly torchrun's arguments).
import re
import sys

from torch.distributed.elastic.multiprocessing import api

if api.Std.from_str("0") is None:
    def _from_str(cls, vm):
        if re.fullmatch(r"[0-3]", vm):
            return cls(int(vm))
        return {int(i): cls(int(v)) for i, v in (m.split(":") for m in vm.split(","))}

    api.Std.from_str = classmethod(_from_str)

from torch.distributed.run import main  # noqa: E402

sys.exit(main())
