#!/usr/bin/env python3
"""What limits MAPE after a monotone calibration map (docs/accuracy.md, "Round 2").

Usage: scripts/calibration_limits.py PREDICTIONS.jsonl  (lcm-predict --out of a labelled file,
eval.calibrated=false). Prints the per-program mean MAPE (model-spec §7, without the 6-decimal
rounding) of the raw predictions, of the MAPE-optimal monotone step map fitted on these very
predictions (an oracle: a bound on what any monotone map can reach on this file), and of the
best per-program scale factor (an oracle per-program offset in log space).
"""
import json, math, sys, statistics as st
rows=[json.loads(l) for l in open(sys.argv[1])]
rows=[r for r in rows if r['measured_speedup'] is not None]
def pmape(pred):
    by={}
    for r,p in zip(rows,pred):
        by.setdefault(r['program'],[]).append(100*abs(r['measured_speedup']-p)/(r['measured_speedup']+1e-5))
    return st.mean(st.mean(v) for v in by.values())
raw=[r['predicted_speedup'] for r in rows]
# weighted isotonic L1 with weights 1/y on log score, simple PAVA with sorted lists (n=9k ok)
idx=sorted(range(len(rows)), key=lambda i: raw[i])
blocks=[]
def wmed(pts):
    pts=sorted(pts); tot=sum(w for _,w in pts); acc=0
    for y,w in pts:
        acc+=w
        if acc>=tot/2: return y
for i in idx:
    y=rows[i]['measured_speedup']; blocks.append([[ (y,1/(y+1e-5)) ],[i]]); blocks[-1].append(y)
    while len(blocks)>1 and blocks[-2][2]>=blocks[-1][2]:
        b=blocks.pop(); a=blocks.pop(); pts=a[0]+b[0]; blocks.append([pts,a[1]+b[1],wmed(pts)])
fit=[0]*len(rows)
for pts,ids,v in blocks:
    for i in ids: fit[i]=v
print("per-program MAPE raw %.1f, oracle step map on validation %.1f (%d blocks)"%(pmape(raw),pmape(fit),len(blocks)))
# per-program oracle: each program's best constant scale factor (what an exact per-program offset would give)
by={}
for i,r in enumerate(rows): by.setdefault(r['program'],[]).append(i)
best=[0]*len(rows)
for p,ids in by.items():
    # MAPE-optimal factor c: minimise sum |y - c*p|/y : weighted median of y/p with weights p/y
    pts=sorted(((rows[i]['measured_speedup']/raw[i], raw[i]/rows[i]['measured_speedup']) for i in ids))
    c=wmed(pts)
    for i in ids: best[i]=c*raw[i]
print("per-program oracle scale factor (a perfect per-program offset in log space): %.1f"%pmape(best))
