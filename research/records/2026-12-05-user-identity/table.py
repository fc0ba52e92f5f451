# Prints the README's table rows from the eval outputs in this folder: python3 table.py TAG...
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
def load(tag, kind):
    p = os.path.join(here, f'{tag}-{kind}.json')
    return json.load(open(p)) if os.path.exists(p) else None
pct = lambda x: f'{100 * x:.0f} %'
for tag in sys.argv[1:]:
    s1, s4, om, fid = (load(tag, k) for k in ('s1', 's4', 'onemsg', 'fid'))
    cells = [tag]
    if s1:
        c = s1['conversation']
        cells += [pct(c['success']), pct(c['successWithoutRule']), f"{c['writes'] - c['unconfirmed']['writes']} of {c['writes']}"]
    else:
        cells += ['', '', '']
    cells.append(' / '.join(f'{x:.3f}' for x in s4['conversation']['passK']) if s4 else '')
    cells.append(pct(om['success']) if om else '')
    if fid:
        u = fid['userFidelity']
        cells.append(f"{100 * u['infoAndDecision']:.1f} % ({100 * u['info']:.1f} / {100 * u['decision']:.1f} / {100 * u['byKind']['identity']['all']:.1f} %)")
    else:
        cells.append('')
    print('| ' + ' | '.join(cells) + ' |')
