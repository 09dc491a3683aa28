/* result.html of two monitor outputs compared: the step x module heat map
 * (each cell: the module's largest cross-run difference over its threshold
 * at that step; above 1 is beyond the runs' own noise), the divergent step
 * marked, and the trend of a module (click its name or cell) and of the
 * series named at the divergence. */
(function () {
  'use strict';
  var D = MSP.data(), el = MSP.el;
  var app = document.getElementById('msp-app');
  var div = D.divergence;
  var head = el('header', null, [el('h1', {text: 'msprobe compare: monitor outputs'}),
    el('div', {cls: 'sub', text: 'bench ' + D.bench + '  |  compare ' + D.cmp})]);
  var main = el('main');
  app.appendChild(head);
  app.appendChild(main);
  main.appendChild(el('div', {id: 'msp-errors'}));
  var verdict = div ? 'first divergent step: ' + div.step + ' rank ' + div.rank + ' ' + div.module +
      ' (' + div.kind + ' ' + div.name + ' ' + div.metric + ')' : 'no divergent step';
  main.appendChild(el('section', {cls: 'summary'}, [el('h2', {id: 'verdict', text: verdict}),
    el('span', {text: D.pairs + ' series compared over ' + D.steps.length + ' steps'}),
    el('span', {text: 'rule: W ' + D.rule.window + ', P ' + D.rule.persist + ', K ' + D.rule.k_noise +
      ', B ' + D.rule.k_base + ', F ' + D.rule.rel_floor}),
    D.from_start ? el('span', {text: 'differ from the first step: ' + D.from_start +
      ' series (how the runs differ from the start: the baseline after, not a divergence)'}) : null,
    D.nan_bench ? el('span', {text: 'first NaN/Inf (bench): step ' + D.nan_bench.step + ' ' + D.nan_bench.name}) : null,
    D.nan_cmp ? el('span', {text: 'first NaN/Inf (compare): step ' + D.nan_cmp.step + ' ' + D.nan_cmp.name}) : null]));
  /* the heat map */
  var sec = el('section', null, [el('h2', {text: 'Difference over threshold, step x module'}),
    el('p', {cls: 'note', text: 'Each cell: the largest |bench - compare| / threshold among the ' +
      'module\'s series at that step (1 = the threshold). White: equal; blue: within noise; ' +
      'yellow to red: beyond it. The divergent step is outlined.'})]);
  var legend = el('div', {cls: 'legend'});
  [0.001, 0.01, 0.1, 1, 10, 100, 1e4].forEach(function (v) {
    legend.appendChild(el('span', {style: 'background:' + color(v), title: String(v)}));
    legend.appendChild(document.createTextNode(String(v) + ' '));
  });
  sec.appendChild(legend);
  var names = el('div', {id: 'heat-names'});
  var canvas = el('canvas', {id: 'heat'});
  sec.appendChild(el('div', {cls: 'heatwrap'}, [names, canvas]));
  var tip = el('div', {id: 'heat-tip'});
  sec.appendChild(tip);
  main.appendChild(sec);
  var S = D.steps.length, M = D.modules.length;
  /* a canvas past 32767 pixels is not drawn: past 4000 steps a column
   * holds several steps (the largest value of them) */
  var per = Math.max(1, Math.ceil(S / 4000)), C = Math.ceil(S / per);
  var cw = Math.max(2, Math.min(14, Math.floor(1100 / Math.max(C, 1)))), ch = 14;
  canvas.width = C * cw;
  canvas.height = M * ch;
  function cell(col, m) {
    var best = null;
    for (var s = col * per; s < Math.min(S, (col + 1) * per); s++) {
      var v = D.heat[s][m];
      if (v !== null && (best === null || v > best)) best = v;
    }
    return best;
  }
  function color(v) {
    if (v === null || v === undefined) return '#f1f4f8';
    if (v <= 0) return '#ffffff';
    var l = Math.log10(v);
    if (l < 0) { var t = Math.max(0, Math.min(1, (l + 4) / 4)); return 'rgb(' + Math.round(235 - 120 * t) + ',' + Math.round(242 - 80 * t) + ',255)'; }
    var u = Math.min(1, l / 3);
    return 'rgb(' + 248 + ',' + Math.round(235 - 130 * u) + ',' + Math.round(132 - 25 * u) + ')';
  }
  var ctx = canvas.getContext('2d');
  for (var col = 0; col < C; col++) for (var m = 0; m < M; m++) {
    ctx.fillStyle = color(cell(col, m));
    ctx.fillRect(col * cw, m * ch, cw, ch);
  }
  var divStep = div ? Math.floor(D.steps.indexOf(div.step) / per) : -1;
  var divMod = div ? D.modules.indexOf(div.module) : -1;
  if (divStep >= 0) {
    ctx.strokeStyle = '#6a1b9a';
    ctx.lineWidth = 1;
    ctx.strokeRect(divStep * cw + 0.5, 0.5, cw - 1, M * ch - 1);
    if (divMod >= 0) { ctx.lineWidth = 2; ctx.strokeStyle = '#000'; ctx.strokeRect(divStep * cw, divMod * ch, cw, ch); }
  }
  D.modules.forEach(function (name, m) {
    names.appendChild(el('div', {cls: m === divMod ? 'div' : '', style: 'height:' + ch + 'px;line-height:' + ch + 'px',
      title: name, text: name, onclick: function () { trend(m); }}));
  });
  canvas.addEventListener('mousemove', function (e) {
    var r = canvas.getBoundingClientRect();
    var col = Math.floor((e.clientX - r.left) / cw), m = Math.floor((e.clientY - r.top) / ch);
    if (col < 0 || col >= C || m < 0 || m >= M) return;
    var v = cell(col, m), last = Math.min(S, (col + 1) * per) - 1;
    tip.textContent = 'step ' + D.steps[col * per] + (per > 1 ? '-' + D.steps[last] : '') + ', ' +
      D.modules[m] + ': ' + (v === null ? 'no series' : v.toPrecision(3));
  });
  canvas.addEventListener('click', function (e) {
    var r = canvas.getBoundingClientRect();
    var m = Math.floor((e.clientY - r.top) / ch);
    if (m >= 0 && m < M) trend(m);
  });
  /* a module's trend */
  var tsec = el('section', null, [el('h2', {id: 'trend-title', text: 'Trend'})]);
  var tbox = el('div', {cls: 'chartbox'});
  var tcanvas = el('canvas');
  tbox.appendChild(tcanvas);
  tsec.appendChild(tbox);
  main.appendChild(tsec);
  var tchart = null;
  function trend(m) {
    document.getElementById('trend-title').textContent = 'Trend of ' + D.modules[m] + ': largest difference / threshold by step';
    var pts = D.steps.map(function (st, s) { var v = D.heat[s][m]; return {x: st, y: v && v > 0 ? v : null}; });
    if (tchart) tchart.destroy();
    tchart = new Chart(tcanvas.getContext('2d'), {type: 'line', data: {datasets: [
      {label: D.modules[m], data: pts, borderColor: '#1f6fd1', pointRadius: 0, spanGaps: false},
      {label: 'threshold', data: [{x: D.steps[0], y: 1}, {x: D.steps[S - 1], y: 1}], borderColor: '#c62828', borderDash: [4, 4], pointRadius: 0}]},
      options: {animation: false, maintainAspectRatio: false, parsing: false,
        scales: {x: {type: 'linear', title: {display: true, text: 'step'}}, y: {type: 'logarithmic', title: {display: true, text: 'difference / threshold'}}}}});
  }
  /* the series named at the divergence: both runs' values */
  if (D.named) {
    var nsec = el('section', null, [el('h2', {text: 'Series ' + D.named.label})]);
    var nbox = el('div', {cls: 'chartbox'});
    var ncanvas = el('canvas');
    nbox.appendChild(ncanvas);
    nsec.appendChild(nbox);
    main.appendChild(nsec);
    function xy(a) { return D.named.steps.map(function (st, i) { return {x: st, y: a[i]}; }); }
    new Chart(ncanvas.getContext('2d'), {type: 'line', data: {datasets: [
      {label: 'bench', data: xy(D.named.bench), borderColor: '#1f6fd1', pointRadius: 0},
      {label: 'compare', data: xy(D.named.cmp), borderColor: '#c62828', pointRadius: 0},
      {label: '|difference|', data: xy(D.named.diff), borderColor: '#6a1b9a', pointRadius: 0, yAxisID: 'y2'},
      {label: 'threshold', data: xy(D.named.thr), borderColor: '#8a4b00', borderDash: [4, 4], pointRadius: 0, yAxisID: 'y2'}]},
      options: {animation: false, maintainAspectRatio: false, parsing: false,
        scales: {x: {type: 'linear', title: {display: true, text: 'step'}}, y: {position: 'left'},
          y2: {type: 'logarithmic', position: 'right', grid: {drawOnChartArea: false}}}}});
  }
  trend(divMod >= 0 ? divMod : 0);
  MSP.done({'data-divergent-step': div ? String(div.step) : 'none'});
})();
