const fs=require('fs');
const base=JSON.parse(fs.readFileSync('models/default/heldout.json','utf8')).result.perTask;
const b=new Map(base.map(t=>[t.taskId,t]));
for (let s=1;s<=5;s++){
  let r; try { r=JSON.parse(fs.readFileSync(`runs/flips/s${s}.json`,'utf8')); } catch { continue; }
  let win=[],loss=[];
  for (const t of r.perTask){ const o=b.get(t.taskId); if(!o) continue; if(t.reward>0.5&&o.reward<0.5) win.push(t.family); if(t.reward<0.5&&o.reward>0.5) loss.push(t.family); }
  console.log(`s${s} success ${r.success} wins ${win.length} [${win.join(',')}] losses ${loss.length} [${loss.join(',')}]`);
}
