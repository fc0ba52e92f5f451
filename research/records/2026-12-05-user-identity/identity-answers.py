# How the identity turns of a user-fidelity eval were answered: right, with another of the mini world's 16 users' identity
# (memorised), or with an invented or partly copied one. python3 identity-answers.py FID.json...
import json,collections,sys,re
users=[('sophia','garcia','sophia.garcia9791'),('mason','lopez','mason.lopez8921'),('evelyn','lopez','evelyn.lopez6910'),('harper','ito','harper.ito2682'),('lucas','johansson','lucas.johansson7741'),('noah','li','noah.li7327'),('isabella','santos','isabella.santos9317'),('mohamed','smith','mohamed.smith3152'),('chen','lopez','chen.lopez1681'),('james','lee','james.lee4131'),('yusuf','li','yusuf.li3523'),('aarav','lee','aarav.lee6460'),('juan','nguyen','juan.nguyen7877'),('ava','smith','ava.smith4465'),('omar','taylor','omar.taylor9929'),('ava','kovacs','ava.kovacs8119')]
for p in sys.argv[1:]:
  d=json.load(open(p)); c=collections.Counter()
  for t in d['userFidelity']['perTurn']:
    if t['kind']!='identity': continue
    if t['agree']['all']: c['right']+=1; continue
    x=t['text'].lower()
    if any(e in x or f'{a} {b}' in x for a,b,e in users): c['another real user']+=1
    else: c['invented or partial']+=1
  print(p.split('/')[-1], dict(c))
