"""Child of test_lcm.py::test_no_leak_over_10000_calls: CALLS calls of the module, with scored
schedules, unscoreable ones, programs that raise, metrics, readers and Models, then exit, so that
the preloaded LeakSanitizer reports what was never freed.

    python3 leak_check.py CKPT PROGRAMS [CALLS]"""
import sys

import lcm

with open("/proc/self/maps") as maps:
    if any("liblsan" in line or "libasan" in line for line in maps):
        print("leak checker loaded")

ckpt, path = sys.argv[1], sys.argv[2]
calls = int(sys.argv[3]) if len(sys.argv) > 3 else 10000
model = lcm.Model(ckpt)
reader = lcm.read_looperset(path)
rec = next(reader)
prog, untr, sched = rec["program"], rec["untransformed"], rec["schedules"][:1]
for i in range(calls):
    model.predict(prog, sched, untransformed=untr)
    if i % 10 == 0:
        model.predict(prog, ["{oops"], untransformed=untr, errors="return")
        try:
            model.predict("{", sched)
        except lcm.SchemaError:
            pass
        lcm.metrics([1.0, 2.0, 3.0], [1.5, 2.0, 2.5])
    if i % 1000 == 0:
        list(lcm.read_looperset(path))
        lcm.Model(ckpt).info
print("calls", calls)
