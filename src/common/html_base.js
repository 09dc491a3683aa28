/* What every msprobe report page shares (embedded into msprobe at build time,
 * written before the report's own script): script errors shown on the page
 * (#msp-errors) instead of only in a console nobody opens, the page's data,
 * an element builder, and the mark tests wait for (body data-ready). */
var MSP = (function () {
  'use strict';
  var errors = [];
  window.addEventListener('error', function (e) {
    errors.push(String(e.message || e));
    var box = document.getElementById('msp-errors');
    if (box) box.textContent = errors.join('\n');
  });
  /* el('td', {cls: 'num', text: '1', 'data-value': '1', onclick: fn}, [children]) */
  function el(tag, attrs, kids) {
    var e = document.createElement(tag);
    if (attrs) for (var k in attrs) {
      if (k === 'text') e.textContent = attrs[k];
      else if (k === 'cls') e.className = attrs[k];
      else if (k.slice(0, 2) === 'on') e.addEventListener(k.slice(2), attrs[k]);
      else e.setAttribute(k, attrs[k]);
    }
    (kids || []).forEach(function (c) { if (c != null) e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c); });
    return e;
  }
  return {
    el: el,
    errors: errors,
    data: function () { return JSON.parse(document.getElementById('msp-data').textContent); },
    /* the page is drawn: data-ready "1", or "error" when a script failed */
    done: function (extra) {
      for (var k in extra || {}) document.body.setAttribute(k, extra[k]);
      document.body.setAttribute('data-ready', errors.length ? 'error' : '1');
    }
  };
})();
