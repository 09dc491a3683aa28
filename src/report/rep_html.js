/* result.html of msprobe compare: draws the data object (msp-data) with
 * Chart.js. Embedded into msprobe at build time; runs offline from the file.
 * Sections: summary, error flow (per step and rank), model tree, suspect
 * cards, across steps. Elements tests read carry data-* attributes with the
 * exact values shown (msprobe-compare(1), HTML REPORT). */
(function () {
  'use strict';
  var t0 = performance.now();
  var D = MSP.data(), el = MSP.el;
  var R = D.rec;
  var NL = R.name.length;
  var DIRS = ['forward', 'backward', 'optimizer'];
  var CAUSES = ['', 'introduced', 'inherited'];
  var VERDICTS = ['Yes', 'No', 'Warning'];
  var YMIN = 1e-10;  /* log axis: an error of exactly 0 is drawn here */

  /* ---- small helpers ---- */
  function fmt(v, digits) {
    if (v === null || v === undefined || Number.isNaN(v)) return 'N/A';
    if (v === Infinity) return 'inf';
    if (v === -Infinity) return '-inf';
    if (v === 0) return '0';
    var a = Math.abs(v);
    if (a >= 1e-3 && a < 1e5) return String(Number(v.toPrecision(digits || 4)));
    return v.toExponential((digits || 4) - 1);
  }
  /* A number cell: text for people, data-value for tests (the exact double). */
  function num(v, digits) {
    return el('td', {cls: 'num', 'data-value': v === null ? 'N/A' : String(v), text: fmt(v, digits)});
  }
  function ylog(v) { return v === null || !(v > YMIN) ? YMIN : (v === Infinity ? 1e10 : v); }
  /* Colour of an error on a log scale: green at 1e-7 and below, red at 1 and above. */
  function errColor(v) {
    if (v === null || v === undefined) return '#e3e8ee';
    var t = v === Infinity ? 1 : Math.min(1, Math.max(0, (Math.log10(Math.max(v, 1e-12)) + 7) / 7));
    return 'hsl(' + Math.round(120 * (1 - t)) + ',70%,' + Math.round(82 - 22 * t) + '%)';
  }
  /* Log axis ticks: powers of ten only, as 1e-6. */
  function logTick(v) {
    var e = Math.log10(v);
    return Math.abs(e - Math.round(e)) < 1e-9 ? '1e' + Math.round(e) : '';
  }
  function blockOf(step, rank) { return step + '/' + rank; }

  /* ---- records by step and rank ---- */
  var blocks = {};     /* "step/rank" -> listed positions in order */
  var byName = {};     /* "step/rank" -> name -> position */
  for (var i = 0; i < NL; i++) {
    var key = blockOf(R.step[i], R.rank[i]);
    (blocks[key] = blocks[key] || []).push(i);
    (byName[key] = byName[key] || {})[R.name[i]] = i;
  }
  var cardOf = {};     /* listed position -> suspect place */
  D.suspects.forEach(function (s) { if (s.rec >= 0 && !(s.rec in cardOf)) cardOf[s.rec] = s.place; });
  var series = D.series;
  var rootSeries = 0;
  if (D.suspects.length) {
    var s0 = D.suspects[0];
    series.forEach(function (s, k) { if (s.step === R.step[s0.rec] && s.rank === R.rank[s0.rec] && rootSeries === 0) rootSeries = k; });
  }

  /* ---- page skeleton ---- */
  var app = document.getElementById('msp-app');
  var head = el('header', null, [
    el('h1', {text: 'msprobe compare'}),
    el('div', {cls: 'sub', text: 'bench: ' + (D.bench || '?') + '   compare: ' + (D.cmp || '?')})]);
  document.body.insertBefore(head, app);
  var main = el('main');
  app.appendChild(main);
  main.appendChild(el('pre', {id: 'msp-errors'}));

  var rootText = 'no introduced error found';
  if (D.suspects.length) {
    var sr = D.suspects[0];
    rootText = 'first introduced error: step ' + R.step[sr.rec] + ' rank ' + R.rank[sr.rec] + ' ' + (sr.gap ? 'before ' : '') + sr.name;
  }
  var summary = el('section', {id: 'summary'}, [
    el('h2', {text: 'Summary'}),
    el('div', {cls: 'summary'}, [
      el('span', null, ['step\u00d7rank pairs ', el('b', {text: String(D.n_pairs)})]),
      el('span', null, ['records ', el('b', {id: 'n-records', text: String(D.n_records)})]),
      el('span', null, ['tensors ', el('b', {text: String(D.n_tensors)})]),
      el('span', null, ['failing records ', el('b', {text: String(D.n_failed)})]),
      el('span', null, ['suspects ', el('b', {text: String(D.n_suspects)})])]),
    el('p', {id: 'root-line', text: rootText}),
    el('p', {cls: 'note', text: 'Error = \u2016npu \u2212 bench\u2016 / \u2016bench\u2016 of a tensor (scale-free); a record\u2019s output error is its worst output\u2019s, its input error its worst input\u2019s. A record introduced error when its output error is above its dtype floor and 8\u00d7 its input error (msprobe-compare(1), ROOT CAUSE).'})]);
  if (D.listed < D.n_records)
    summary.appendChild(el('p', {cls: 'note', id: 'listing-note', text: 'This page lists ' + D.listed + ' of ' + D.n_records + ' records (at most ' + D.max_records + '): every charted record and suspect, then the largest output errors. result.xlsx has them all.'}));
  D.unpaired.forEach(function (u) { summary.appendChild(el('p', {cls: 'note', text: u})); });
  main.appendChild(summary);

  /* ---- error flow ---- */
  var flowSec = el('section', {id: 'flow'}, [el('h2', {text: 'Error flow'})]);
  main.appendChild(flowSec);
  var sel = el('select', {id: 'flow-select'});
  series.forEach(function (s, k) {
    sel.appendChild(el('option', {value: String(k), text: 'step ' + s.step + ' rank ' + s.rank + ' (' + s.records + ' records)'}));
  });
  sel.value = String(rootSeries);
  var resetBtn = el('button', {type: 'button', id: 'flow-reset', text: 'Reset zoom'});
  flowSec.appendChild(el('div', {cls: 'controls'}, [el('label', null, ['Step and rank ', sel]), resetBtn,
    el('span', {cls: 'note', text: 'Drag across the chart to zoom into a range of execution order, wheel to zoom, double-click or Reset to see all; hover a point for its record.'})]));
  var flowNote = el('p', {cls: 'note', id: 'flow-note'});
  flowSec.appendChild(flowNote);
  var flowCanvas = el('canvas', {id: 'flow-canvas'});
  flowSec.appendChild(el('div', {cls: 'chartbox'}, [flowCanvas]));
  flowSec.appendChild(el('p', {cls: 'note', text: 'Marked suspects on this chart (click to open the card):'}));
  var marks = el('ol', {id: 'flow-marks'});
  flowSec.appendChild(marks);

  var COLORS = {fwd: '#1f6fd1', fwdIn: 'rgba(31,111,209,0.35)', bwd: '#e07b00', bwdIn: 'rgba(224,123,0,0.35)',
                opt: '#6b7785', optIn: 'rgba(107,119,133,0.35)', sus: '#c62828', floor: 'rgba(120,130,140,0.13)'};
  function pt(i, v) { return {x: R.order[i], y: ylog(v), i: i}; }
  function flowData(k) {
    var s = series[k];
    var ds = {floor: [], fwd: [], fwdIn: [], bwd: [], bwdIn: [], opt: [], optIn: [], sus: []};
    var keys = [['fwd', 'fwdIn'], ['bwd', 'bwdIn'], ['opt', 'optIn']];
    s.points.forEach(function (i) {
      var kk = keys[R.dir[i]];
      if (R.floor[i] !== null) ds.floor.push({x: R.order[i], y: ylog(R.floor[i]), i: i});
      if (R.out[i] !== null) ds[kk[0]].push(pt(i, R.out[i]));
      if (R.in[i] !== null) ds[kk[1]].push(pt(i, R.in[i]));
      if (R.sus[i] !== 0 || (i in cardOf)) ds.sus.push(pt(i, R.out[i]));
    });
    return ds;
  }
  function dataset(label, data, color, line, extra) {
    var d = {label: label, data: data, borderColor: color, backgroundColor: color, showLine: line,
             borderWidth: line ? 1.2 : 0, pointRadius: line ? 1.6 : 2.2, pointHoverRadius: 5, spanGaps: true};
    for (var k in extra || {}) d[k] = extra[k];
    return d;
  }
  function causeText(i) {
    var c = CAUSES[R.cause[i]];
    if (R.sus[i] === -1) c += ', root cause';
    else if (R.sus[i] > 0) c += ', suspect ' + R.sus[i];
    return c;
  }
  var flowChart = null;
  function drawFlow(k) {
    var ds = flowData(k), s = series[k];
    var sets = [
      dataset('dtype floor', ds.floor, COLORS.floor, true, {fill: 'start', stepped: 'middle', pointRadius: 0, borderWidth: 0, order: 9}),
      dataset('forward: output error', ds.fwd, COLORS.fwd, true),
      dataset('forward: input error', ds.fwdIn, COLORS.fwdIn, false),
      dataset('backward: output error', ds.bwd, COLORS.bwd, true),
      dataset('backward: input error', ds.bwdIn, COLORS.bwdIn, false),
      dataset('optimizer: output error', ds.opt, COLORS.opt, true),
      dataset('optimizer: input error', ds.optIn, COLORS.optIn, false),
      dataset('suspect', ds.sus, COLORS.sus, false, {pointStyle: 'triangle', pointRadius: 8, pointHoverRadius: 10, order: -1})];
    if (flowChart) flowChart.destroy();
    flowChart = new Chart(flowCanvas.getContext('2d'), {
      type: 'scatter',
      data: {datasets: sets},
      options: {
        animation: false, maintainAspectRatio: false, normalized: true,
        interaction: {mode: 'nearest', intersect: false, axis: 'x'},
        scales: {
          x: {type: 'linear', title: {display: true, text: 'execution order in the step'}},
          y: {type: 'logarithmic', min: YMIN, title: {display: true, text: 'relative error (log; 0 drawn at 1e-10)'},
              ticks: {callback: logTick}}
        },
        plugins: {
          legend: {position: 'bottom'},
          tooltip: {callbacks: {
            title: function (items) { return items.length ? R.name[items[0].raw.i] : ''; },
            label: function (item) {
              var i = item.raw.i;
              if (item.datasetIndex === 0) return 'dtype floor ' + fmt(R.floor[i]);
              return item.dataset.label + ': out ' + fmt(R.out[i]) + ', in ' + fmt(R.in[i]) +
                ', floor ' + fmt(R.floor[i]) + ' ' + causeText(i);
            }}}
        },
        onClick: function (ev, items) {
          if (!items.length) return;
          var i = flowChart.data.datasets[items[0].datasetIndex].data[items[0].index].i;
          if (i in cardOf) location.hash = '#suspect-' + cardOf[i];
          selectRecord(i);
        }
      }
    });
    flowNote.textContent = s.aggregated
      ? 'Aggregated: ' + s.records + ' records in this step and rank, more than the ' + D.max_points +
        ' points a chart holds here; each point is the record with the largest output error in its stretch of execution order, and every suspect is drawn.'
      : 'Every record of step ' + s.step + ' rank ' + s.rank + ' with a comparable output (' + s.points.length + ' points).';
    /* What the chart drew, read back from Chart.js: the suspects it marks. */
    marks.textContent = '';
    var meta = flowChart.getDatasetMeta(7);
    flowChart.data.datasets[7].data.forEach(function (p, j) {
      var i = p.i, place = cardOf[i];
      var e = meta.data[j] || {};
      var label = (place ? '#' + place + ' ' : '') + R.name[i] + ' (output error ' + fmt(R.out[i]) + ', ' + causeText(i).replace(/^, /, '') + ')';
      marks.appendChild(el('li', {'data-record': R.name[i], 'data-step': String(R.step[i]), 'data-rank': String(R.rank[i]),
        'data-out': String(R.out[i]), 'data-px': String(Math.round(e.x || -1)), 'data-py': String(Math.round(e.y || -1)),
        'data-place': String(place || 0)},
        [place ? el('a', {href: '#suspect-' + place, text: label}) : label]));
    });
    flowCanvas.setAttribute('data-charted', String(s.points.length));
    flowCanvas.setAttribute('data-points', String(flowChart.data.datasets.slice(1, 7).reduce(function (a, d) { return a + d.data.length; }, 0)));
  }
  function zoomTo(lo, hi) {
    if (!(hi > lo)) return;
    flowChart.options.scales.x.min = lo;
    flowChart.options.scales.x.max = hi;
    flowChart.update('none');
  }
  function resetZoom() {
    delete flowChart.options.scales.x.min;
    delete flowChart.options.scales.x.max;
    flowChart.update('none');
  }
  (function zoomHandlers() {
    var start = null;
    flowCanvas.addEventListener('mousedown', function (e) { start = e.offsetX; });
    flowCanvas.addEventListener('mouseup', function (e) {
      if (start === null) return;
      var a = Math.min(start, e.offsetX), b = Math.max(start, e.offsetX);
      start = null;
      if (b - a < 6) return;
      var sx = flowChart.scales.x;
      zoomTo(sx.getValueForPixel(a), sx.getValueForPixel(b));
    });
    flowCanvas.addEventListener('wheel', function (e) {
      e.preventDefault();
      var sx = flowChart.scales.x, at = sx.getValueForPixel(e.offsetX);
      var f = e.deltaY > 0 ? 1.25 : 0.8;
      zoomTo(at - (at - sx.min) * f, at + (sx.max - at) * f);
    }, {passive: false});
    flowCanvas.addEventListener('dblclick', resetZoom);
    resetBtn.addEventListener('click', resetZoom);
  })();

  /* ---- model tree ---- */
  var treeSec = el('section', {id: 'model'}, [el('h2', {text: 'Model tree'})]);
  main.appendChild(treeSec);
  var search = el('input', {type: 'search', id: 'tree-search', placeholder: 'search by name', size: '40'});
  treeSec.appendChild(el('div', {cls: 'controls'}, [search, el('span', {cls: 'note', id: 'tree-note'})]));
  var legend = el('p', {cls: 'note'}, ['Each node is coloured by the worst output error in it: ',
    el('span', {cls: 'swatch', style: 'background:' + errColor(1e-7)}), '\u22641e-7 ',
    el('span', {cls: 'swatch', style: 'background:' + errColor(1e-4)}), '1e-4 ',
    el('span', {cls: 'swatch', style: 'background:' + errColor(1e-2)}), '1e-2 ',
    el('span', {cls: 'swatch', style: 'background:' + errColor(1)}), '\u22651; marks: ',
    el('span', {cls: 'badge root', text: 'root cause'}), el('span', {cls: 'badge suspect', text: 'suspect'}),
    el('span', {cls: 'badge introduced', text: 'introduced'}), el('span', {cls: 'badge inherited', text: 'inherited'}),
    '. Click a node for its records.']);
  treeSec.appendChild(legend);
  var treeBox = el('div', {id: 'tree'});
  var recBox = el('div', {id: 'node-records'}, [el('p', {cls: 'note', text: 'Click a node of the tree, or a point of the chart.'})]);
  treeSec.appendChild(el('div', {cls: 'layout'}, [treeBox, recBox]));

  /* "Module.a.b.Linear.forward.0" -> module path "a.b"; backward names map to forward. */
  var MODRE = /^Module\.(.*)\.([^.]+)\.(forward|backward)\.(\d+)$/;
  var MODROOT = /^Module\.([^.]+)\.(forward|backward)\.(\d+)$/;
  function forwardName(name) {
    var m = MODRE.exec(name) || MODROOT.exec(name);
    if (m) return name.replace(/\.backward\.(\d+)$/, '.forward.$1');
    return name.replace(/\.backward$/, '.forward');
  }
  function isModule(i) { return R.name[i].slice(0, 7) === 'Module.'; }

  var tree = null;     /* {key, label, recs: [...], kids: [...], parent, worst, li} */
  var nodeByRec = {};  /* listed position -> its tree node */
  var KIDS_SHOWN = 500; /* children rendered at a time; a button shows more */
  function pname(i) { return R.pidx[i] >= 0 ? R.pnames[R.pidx[i]] : null; }
  function buildTree(k) {
    var s = series[k], key = blockOf(s.step, s.rank), rows = blocks[key] || [], names = byName[key] || {};
    var nodes = {}, rootNode = {key: '', label: 'step ' + s.step + ' rank ' + s.rank, recs: [], kids: [], parent: null};
    var hasParent = rows.some(function (i) { return pname(i) !== null; });
    var hasModules = hasParent || rows.some(isModule);
    function node(keyName, label) {
      if (!nodes[keyName]) nodes[keyName] = {key: keyName, label: label, recs: [], kids: [], parent: null};
      return nodes[keyName];
    }
    /* the module an API record ran in: its own parent, or its forward's */
    function moduleOf(i) {
      var p = pname(i);
      if (p === null && R.dir[i] === 1) { var f = names[forwardName(R.name[i])]; if (f !== undefined) p = pname(f); }
      return p;
    }
    var note;
    if (hasModules) {
      /* nodes: module forward records, and every module named as a parent
         (its own record may not be compared: -l api) */
      rows.forEach(function (i) {
        if (isModule(i) && R.dir[i] !== 1) node(R.name[i], R.name[i].replace(/^Module\./, ''));
        var p = pname(i);
        if (p !== null) node(p, p.replace(/^Module\./, ''));
      });
      var byPath = {}, roots = [];
      Object.keys(nodes).forEach(function (n) {
        var m = MODRE.exec(n);
        if (m && !(m[1] in byPath)) byPath[m[1]] = nodes[n];
        if (!m && MODROOT.exec(n)) roots.push(nodes[n]);
      });
      Object.keys(nodes).forEach(function (n) {
        var i = names[n], p = null;
        if (i !== undefined && pname(i) !== null) p = nodes[pname(i)];
        if (!p) {
          /* nest by dotted module path, else under the one root model */
          var m = MODRE.exec(n), path = m ? m[1] : '';
          for (var cut = path.lastIndexOf('.'); !p && cut > 0; cut = path.lastIndexOf('.', cut - 1)) {
            var q = byPath[path.slice(0, cut)];
            if (q && q !== nodes[n]) p = q;
          }
          if (!p && m && roots.length === 1) p = roots[0];
        }
        nodes[n].parent = p || rootNode;
        nodes[n].parent.kids.push(nodes[n]);
      });
      rows.forEach(function (i) {
        if (isModule(i)) { (nodes[forwardName(R.name[i])] || rootNode).recs.push(i); return; }
        var p = moduleOf(i);
        (p !== null && nodes[p] ? nodes[p] : rootNode).recs.push(i);
      });
      note = hasParent ? 'Modules nest as the model nests them; API records sit under the module they ran in (dump attribute parent).'
                       : 'Modules nest by their dotted path; this dump does not say which module each API call ran in (tensor dumps of dump_mode mix do).';
    } else {
      /* API records only: one node per API */
      rows.forEach(function (i) {
        var api = R.name[i].replace(/\.\d+\.(forward|backward)$/, '');
        var n = node(api, api);
        if (!n.parent) { n.parent = rootNode; rootNode.kids.push(n); }
        n.recs.push(i);
      });
      note = 'This dump has no module records (dump_mode api): records are grouped by API. Dump with dump_mode mix to see the model\u2019s modules.';
    }
    document.getElementById('tree-note').textContent = note;
    function worst(n) {
      var w = null;
      n.recs.forEach(function (i) { var v = R.out[i]; if (v !== null && (w === null || v > w)) w = v; });
      n.kids.forEach(function (c) { var v = worst(c); if (v !== null && (w === null || v > w)) w = v; });
      n.worst = w;
      return w;
    }
    worst(rootNode);
    nodeByRec = {};
    (function index(n) { n.recs.forEach(function (i) { nodeByRec[i] = n; }); n.kids.forEach(index); })(rootNode);
    return rootNode;
  }
  function nodeMarks(n) {
    var m = [], best = 0, cause = 0;
    n.recs.forEach(function (i) {
      if (R.sus[i] === -1) best = -1;
      else if (R.sus[i] > 0 && best !== -1 && (best === 0 || R.sus[i] < best)) best = R.sus[i];
      if (R.cause[i] === 1) cause = 1;
      else if (R.cause[i] === 2 && cause === 0) cause = 2;
    });
    if (best === -1) m.push(['root', 'root cause']);
    else if (best > 0) m.push(['suspect', 'suspect ' + best]);
    if (cause) m.push([CAUSES[cause], CAUSES[cause]]);
    return m;
  }
  var selectedSpan = null;
  function renderNode(n) {
    var ms = nodeMarks(n);
    var span = el('span', {cls: 'node', 'data-node': n.key, 'data-worst': String(n.worst), 'data-color': errColor(n.worst),
      'data-mark': ms.map(function (x) { return x[0]; }).join(' '), style: 'background:' + errColor(n.worst), title: n.key,
      text: n.label});
    span.addEventListener('click', function (e) { e.preventDefault(); showNode(n, span); });
    var line = [span, el('span', {cls: 'err', text: fmt(n.worst)})];
    ms.forEach(function (x) { line.push(el('span', {cls: 'badge ' + x[0], text: x[1]})); });
    var li = el('li');
    n.li = li;
    if (n.kids.length) {
      var det = el('details'), sum = el('summary', null, line);
      det.appendChild(sum);
      var ul = el('ul');
      det.appendChild(ul);
      det.addEventListener('toggle', function () { if (det.open) renderKids(n, ul); });
      li.appendChild(det);
      n.det = det;
      n.ul = ul;
    } else {
      li.appendChild(el('div', {cls: 'leaf'}, line));
    }
    n.span = span;
    return li;
  }
  function renderKids(n, ul, upto) {
    var want = Math.min(n.kids.length, Math.max(upto || 0, KIDS_SHOWN));
    n.shown = n.shown || 0;
    if (n.more) { n.more.remove(); n.more = null; }
    for (; n.shown < want; n.shown++) ul.appendChild(renderNode(n.kids[n.shown]));
    if (n.shown < n.kids.length) {
      var left = n.kids.length - n.shown;
      n.more = el('li', null, [el('button', {type: 'button', text: 'show ' + Math.min(left, KIDS_SHOWN) + ' more of ' + left})]);
      n.more.firstChild.addEventListener('click', function () { renderKids(n, ul, n.shown + KIDS_SHOWN); });
      ul.appendChild(n.more);
    }
  }
  function openTo(n) {
    var chain = [];
    for (var p = n; p; p = p.parent) chain.unshift(p);
    chain.forEach(function (p, k) {
      if (!p.det) return;
      var next = chain[k + 1], at = next ? p.kids.indexOf(next) + 1 : 0;
      renderKids(p, p.ul, at);
      p.det.open = true;
    });
  }
  function drawTree(k) {
    tree = buildTree(k);
    treeBox.textContent = '';
    var ul = el('ul');
    treeBox.appendChild(ul);
    ul.appendChild(renderNode(tree));
    if (tree.det) { renderKids(tree, tree.ul); tree.det.open = true; }
    /* open the way to the first suspect of this step and rank */
    var first = null;
    D.suspects.forEach(function (s) { if (!first && s.rec >= 0 && blockOf(R.step[s.rec], R.rank[s.rec]) === blockOf(series[k].step, series[k].rank)) first = s.rec; });
    if (first !== null) { var n = nodeOfRecord(first); if (n) openTo(n); }
  }
  function nodeOfRecord(i) { return nodeByRec[i] || null; }
  function recordTable(list, hi) {
    var t = el('table', {id: 'records-table'});
    t.appendChild(el('tr', null, ['Record', 'Order', 'Dir', 'Input err', 'Output err', 'Floor', 'Worst Cosine', 'Worst MaxAbsErr', 'Verdict', 'Origin'].map(function (h) { return el('th', {text: h}); })));
    list.forEach(function (i) {
      var name = i in cardOf ? el('a', {href: '#suspect-' + cardOf[i], text: R.name[i]}) : R.name[i];
      t.appendChild(el('tr', {'data-record': R.name[i], cls: i === hi ? 'sel' : ''}, [el('td', null, [name]), el('td', {cls: 'num', text: String(R.order[i])}),
        el('td', {text: DIRS[R.dir[i]]}), num(R.in[i]), num(R.out[i]), num(R.floor[i]), num(R.cos[i], 6), num(R.mae[i]),
        el('td', {text: VERDICTS[R.verdict[i]]}), el('td', {text: causeText(i).replace(/^, /, '')})]));
    });
    return t;
  }
  function showNode(n, span, hi) {
    if (selectedSpan) selectedSpan.classList.remove('selected');
    selectedSpan = span || n.span;
    if (selectedSpan) selectedSpan.classList.add('selected');
    recBox.textContent = '';
    recBox.setAttribute('data-node', n.key);
    recBox.appendChild(el('h3', {text: n.key || n.label}));
    var list = n.recs.slice().sort(function (a, b) { return R.order[a] - R.order[b]; });
    if (!list.length) recBox.appendChild(el('p', {cls: 'note', text: 'No record of its own; open it for its children.'}));
    else recBox.appendChild(recordTable(list, hi));
  }
  function selectRecord(i) {
    var n = nodeOfRecord(i);
    if (!n) return;
    openTo(n);
    showNode(n, n.span, i);
  }
  search.addEventListener('input', function () {
    var q = search.value.trim().toLowerCase(), hits = 0;
    (function clear(n) { if (n.span) n.span.classList.remove('hit'); n.kids.forEach(clear); })(tree);
    if (!q) return;
    (function walk(n) {
      var own = n.key.toLowerCase().indexOf(q) >= 0 || n.recs.some(function (i) { return R.name[i].toLowerCase().indexOf(q) >= 0; });
      if (own && hits < 200) { hits++; openTo(n); if (n.span) n.span.classList.add('hit'); }
      n.kids.forEach(walk);
    })(tree);
  });

  /* ---- suspect cards ---- */
  var cardSec = el('section', {id: 'suspects'}, [el('h2', {text: 'Suspects'})]);
  main.appendChild(cardSec);
  if (!D.suspects.length) cardSec.appendChild(el('p', {text: 'No record introduced error: nothing to suspect.'}));
  else cardSec.appendChild(el('p', {cls: 'note', text: D.suspects.length + ' of ' + D.n_suspects + ' suspects, most likely first.'}));
  var cards = el('div', {cls: 'cards'});
  cardSec.appendChild(cards);
  D.suspects.forEach(function (s) {
    var i = s.rec;
    var step = i >= 0 ? R.step[i] : '?', rank = i >= 0 ? R.rank[i] : '?';
    var card = el('div', {cls: 'card', id: 'suspect-' + s.place, 'data-record': s.name, 'data-step': String(step), 'data-rank': String(rank), 'data-gap': String(s.gap)});
    card.appendChild(el('h3', null, [(s.place === 1 ? 'Root cause: ' : 'Suspect ' + s.place + ': ') + (s.gap ? 'before ' : '') + s.name, el('span', {cls: 'note', text: '  step ' + step + ' rank ' + rank})]));
    card.appendChild(el('div', {cls: 'nums'}, [
      el('span', null, ['input error ', el('b', {cls: 'in-err', 'data-value': String(s.in), text: fmt(s.in)})]),
      el('span', null, ['output error ', el('b', {cls: 'out-err', 'data-value': String(s.out), text: fmt(s.out)})]),
      el('span', null, ['amplification ', el('b', {'data-value': String(s.amp), text: fmt(s.amp, 3) + '\u00d7'})]),
      el('span', null, ['dtype floor ', el('b', {'data-value': String(s.floor), text: fmt(s.floor)})])]));
    card.appendChild(el('p', {cls: 'reason', text: s.reason}));
    if (s.module) card.appendChild(el('p', null, ['in module ', el('code', {cls: 'module', text: s.module})]));
    if (s.replay) {
      var rp = typeof s.replay === 'string' ? s.replay : JSON.stringify(s.replay);
      card.appendChild(el('p', {cls: 'replay'}, ['replay: ', el('b', {text: rp})]));
    }
    if (s.changed_argument) card.appendChild(el('p', {cls: 'replay'}, ['changed argument: ', el('b', {text: s.changed_argument})]));
    if (s.call_site) card.appendChild(el('div', null, [el('div', {cls: 'note', text: 'call site'}), el('pre', {cls: 'call-site', text: s.call_site})]));
    var t = el('table', {cls: 'rows'});
    t.appendChild(el('tr', null, ['Tensor', 'Dtype', 'Shape', 'Error', 'Cosine', 'MaxAbsErr', 'MaxRelativeErr', 'Verdict', 'Note'].map(function (h) { return el('th', {text: h}); })));
    s.rows.forEach(function (r) {
      t.appendChild(el('tr', {cls: r.out ? 'out' : 'in', 'data-name': r.name, 'data-row': String(r.row)}, [
        el('td', {text: r.role + (r.row === s.tensor ? ' \u25c0' : '')}), el('td', {text: r.dtype + (r.bdtype && r.bdtype !== r.dtype ? ' / ' + r.bdtype : '')}),
        el('td', {text: r.shape}), num(r.rel), num(r.cos, 6), num(r.mae), num(r.mre),
        el('td', {text: r.verdict}), el('td', {text: (r.msg || '') + (r.producer ? (r.msg ? '; ' : '') + 'from ' + r.producer : '')})]));
    });
    card.appendChild(t);
    if (s.sample) {
      var plots = el('div', {cls: 'plots'});
      var hc = el('canvas', {cls: 'hist'}), sc = el('canvas', {cls: 'scatter'});
      plots.appendChild(el('div', null, [el('div', {cls: 'note', text: '|compare \u2212 bench| over ' + (s.sample.every === 1 ? 'all ' + s.sample.numel + ' elements' : s.sample.counted + ' of ' + s.sample.numel + ' elements (every ' + s.sample.every + 'th run of 1024)')}), el('div', {cls: 'chartbox small'}, [hc])]));
      plots.appendChild(el('div', null, [el('div', {cls: 'note', text: 'bench vs compare: ' + (s.sample.stride === 1 ? 'every element' : '1 in every ' + s.sample.stride + ' elements') + (s.sample.every === 1 ? '' : ' read') + ' (' + s.sample.npu.length + ' of ' + s.sample.numel + ', at most ' + D.sample_points + ')'}), el('div', {cls: 'chartbox small'}, [sc])]));
      card.appendChild(plots);
      card._plots = function () { drawSample(s.sample, hc, sc); };
    } else if (s.sample_why) {
      card.appendChild(el('p', {cls: 'note', text: 'No element sample: ' + s.sample_why}));
    }
    cards.appendChild(card);
  });
  function drawSample(sm, hc, sc) {
    var labels = [], counts = [];
    var first = -1, last = -1;
    sm.bins.forEach(function (c, k) { if (c) { if (first < 0) first = k; last = k; } });
    if (sm.zero) { labels.push('0'); counts.push(sm.zero); }
    if (sm.below) { labels.push('<1e' + sm.lo); counts.push(sm.below); }
    for (var k = Math.max(first, 0); first >= 0 && k <= last; k++) {
      labels.push('1e' + (sm.lo + k / sm.per).toFixed(2).replace(/\.?0+$/, ''));
      counts.push(sm.bins[k]);
    }
    if (sm.above) { labels.push('\u22651e' + (sm.lo + sm.bins.length / sm.per)); counts.push(sm.above); }
    if (sm.nonfinite) { labels.push('NaN/Inf'); counts.push(sm.nonfinite); }
    hc.setAttribute('data-total', String(counts.reduce(function (a, b) { return a + b; }, 0)));
    new Chart(hc.getContext('2d'), {type: 'bar', data: {labels: labels, datasets: [{label: 'elements', data: counts, backgroundColor: '#1f6fd1'}]},
      options: {animation: false, maintainAspectRatio: false, plugins: {legend: {display: false}},
        scales: {x: {title: {display: true, text: '|compare \u2212 bench| (bin lower edge)'}}, y: {title: {display: true, text: 'elements'}}}}});
    var pts = [], lo = Infinity, hi = -Infinity;
    for (var j = 0; j < sm.npu.length; j++) {
      var b = sm.bench[j], n = sm.npu[j];
      if (b === null || n === null || !isFinite(b) || !isFinite(n)) continue;
      pts.push({x: b, y: n});
      lo = Math.min(lo, b, n); hi = Math.max(hi, b, n);
    }
    sc.setAttribute('data-points', String(pts.length));
    new Chart(sc.getContext('2d'), {type: 'scatter', data: {datasets: [
      {label: 'elements', data: pts, backgroundColor: 'rgba(198,40,40,0.45)', pointRadius: 1.5},
      {label: 'compare = bench', data: isFinite(lo) ? [{x: lo, y: lo}, {x: hi, y: hi}] : [], showLine: true, borderColor: '#6b7785', borderWidth: 1, pointRadius: 0}]},
      options: {animation: false, maintainAspectRatio: false, plugins: {legend: {position: 'bottom'}},
        scales: {x: {title: {display: true, text: 'bench'}}, y: {title: {display: true, text: 'compare'}}}}});
  }

  /* ---- across steps ---- */
  if (D.trend.lines.length) {
    var trSec = el('section', {id: 'steps'}, [el('h2', {text: 'Across steps'}),
      el('p', {cls: 'note', text: 'Output error per step of the ' + D.trend.lines.length + ' records with the largest error in any step (suspects first), followed by name.'})]);
    main.appendChild(trSec);
    var tc = el('canvas', {id: 'trend-canvas', 'data-lines': String(D.trend.lines.length)});
    trSec.appendChild(el('div', {cls: 'chartbox tall'}, [tc]));
    var pal = ['#c62828', '#1f6fd1', '#e07b00', '#2e7d32', '#6a1b9a', '#00838f', '#8d6e63', '#5c6bc0', '#ad1457', '#9e9d24', '#455a64', '#f9a825', '#4e342e', '#00695c', '#283593'];
    new Chart(tc.getContext('2d'), {type: 'line', data: {labels: D.trend.steps.map(function (s) { return 'step ' + s; }),
      datasets: D.trend.lines.map(function (l, k) {
        return {label: l.name + (D.n_pairs > D.trend.steps.length ? ' (rank ' + l.rank + ')' : ''), data: l.err.map(function (v) { return v === null ? null : ylog(v); }),
          borderColor: pal[k % pal.length], backgroundColor: pal[k % pal.length], spanGaps: false, pointRadius: 3};
      })},
      options: {animation: false, maintainAspectRatio: false, scales: {y: {type: 'logarithmic', min: YMIN, title: {display: true, text: 'output error (log)'}, ticks: {callback: logTick}}},
        plugins: {legend: {position: 'bottom', labels: {boxWidth: 10, font: {size: 11}}}}}});
  }

  var foot = el('footer', {text: 'msprobe ' + D.version + ' \u2022 drawn with Chart.js ' + (Chart.version || '') + ' (embedded; this file needs no network) \u2022 numbers as in result.xlsx'});
  document.body.appendChild(foot);

  /* ---- draw ---- */
  function drawAll() {
    var k = Number(sel.value);
    drawFlow(k);
    drawTree(k);
  }
  sel.addEventListener('change', drawAll);
  drawAll();
  Array.prototype.forEach.call(document.querySelectorAll('.card'), function (c) { if (c._plots) c._plots(); });
  MSP.done({'data-render-ms': String(Math.round(performance.now() - t0))});
})();
