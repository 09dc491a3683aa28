/* result.html of msprobe config_check: the items, pass or fail, and their
 * differences, drawn from the data object (msp-data) with Chart.js. Embedded
 * into msprobe at build time; runs offline from the file. */
(function () {
  'use strict';
  var D = MSP.data(), el = MSP.el;
  function badge(st) { return el('span', {cls: 'badge ' + (st === 'n/a' ? 'na' : st), text: st === 'fail' ? 'FAIL' : st}); }
  function cellText(v) { return v === null ? '' : v === true ? 'TRUE' : v === false ? 'FALSE' : String(v); }

  var failed = D.items.filter(function (it) { return it.status === 'fail'; }).length;
  document.body.insertBefore(el('header', null, [el('h1', {text: 'msprobe config_check'}),
    el('div', {cls: 'sub', text: 'bench: ' + D.bench + '   compare: ' + D.cmp})]), document.getElementById('msp-app'));
  var main = el('main');
  document.getElementById('msp-app').appendChild(main);
  main.appendChild(el('pre', {id: 'msp-errors'}));

  var sum = el('section', {id: 'summary'}, [el('h2', null, ['Summary', badge(failed ? 'fail' : 'pass')]),
    el('p', {id: 'verdict', text: failed ? failed + ' of ' + D.items.length + ' items differ' : 'every item passed'})]);
  if (D.salt_mismatch) sum.appendChild(el('p', {cls: 'note', text: 'The packs hashed secret values with different salts: set the same MSPROBE_SECRET_SALT for both runs to compare them.'}));
  var t = el('table', {id: 'items'});
  t.appendChild(el('tr', null, ['item', 'pass_check', 'differences', 'warnings', 'info', 'note'].map(function (h) { return el('th', {text: h}); })));
  D.items.forEach(function (it) {
    t.appendChild(el('tr', {'data-item': it.name, 'data-status': it.status, cls: it.status === 'fail' ? 'l2' : ''}, [
      el('td', null, [el('a', {href: '#item-' + it.name, text: it.name})]), el('td', null, [badge(it.status)]),
      el('td', {cls: 'n-failed', text: String(it.n_failed)}), el('td', {text: String(it.n_warnings)}),
      el('td', {text: String(it.n_info)}), el('td', {text: it.note || ''})]));
  });
  sum.appendChild(t);
  var cv = el('canvas', {id: 'items-chart'});
  sum.appendChild(el('div', {cls: 'chartbox'}, [cv]));
  main.appendChild(sum);
  new Chart(cv.getContext('2d'), {type: 'bar',
    data: {labels: D.items.map(function (it) { return it.name; }), datasets: [
      {label: 'differences (fail)', data: D.items.map(function (it) { return it.n_failed; }), backgroundColor: '#c62828'},
      {label: 'warnings', data: D.items.map(function (it) { return it.n_warnings; }), backgroundColor: '#f9a825'},
      {label: 'info (does not fail)', data: D.items.map(function (it) { return it.n_info; }), backgroundColor: '#90a4ae'}]},
    options: {animation: false, maintainAspectRatio: false, indexAxis: 'y', plugins: {legend: {position: 'bottom'}},
      scales: {x: {stacked: true, title: {display: true, text: 'entries'}}, y: {stacked: true}}}});

  D.items.forEach(function (it) {
    var sec = el('section', {id: 'item-' + it.name, 'data-status': it.status}, [el('h2', null, [it.name, badge(it.status)])]);
    if (it.note) sec.appendChild(el('p', {cls: 'note', text: it.note}));
    if (it.failed.length) {
      sec.appendChild(el('p', {text: 'Differences (' + it.n_failed + '):'}));
      sec.appendChild(el('ul', {cls: 'diffs failed'}, it.failed.map(function (l) { return el('li', {text: l}); })));
    }
    if (it.info.length) {
      sec.appendChild(el('p', {text: 'Differences that do not fail (' + it.n_info + '):'}));
      sec.appendChild(el('ul', {cls: 'diffs info'}, it.info.map(function (l) { return el('li', {text: l}); })));
    }
    if (it.n_failed > it.failed.length || it.n_info > it.info.length)
      sec.appendChild(el('p', {cls: 'note', text: 'Lists cut at ' + D.max_lines + ' lines; result.xlsx has them all.'}));
    if (it.table && it.table.rows.length) {
      var filter = el('input', {type: 'search', placeholder: 'filter rows', size: '30'});
      var tb = el('table', {cls: 'item-table'});
      tb.appendChild(el('tr', null, it.table.cols.map(function (c) { return el('th', {text: c}); })));
      var trs = it.table.rows.map(function (r) {
        var tr = el('tr', {cls: r.level ? 'l' + r.level : ''}, r.cells.map(function (v) { return el('td', {text: cellText(v)}); }));
        tb.appendChild(tr);
        return tr;
      });
      filter.addEventListener('input', function () {
        var q = filter.value.toLowerCase();
        trs.forEach(function (tr) { tr.style.display = !q || tr.textContent.toLowerCase().indexOf(q) >= 0 ? '' : 'none'; });
      });
      sec.appendChild(el('div', null, [filter, el('span', {cls: 'note', text: '  ' + it.table.rows.length + ' of ' + it.table.nrows + ' rows' + (it.table.nrows > it.table.rows.length ? ' (cut at ' + D.max_rows + '; result.xlsx has them all)' : '')})]));
      sec.appendChild(el('div', {cls: 'tablebox'}, [tb]));
    }
    main.appendChild(sec);
  });
  document.body.appendChild(el('footer', {text: 'msprobe ' + D.version + ' \u2022 drawn with Chart.js ' + (Chart.version || '') + ' (embedded; this file needs no network)'}));
  MSP.done();
})();
