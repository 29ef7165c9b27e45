
(function () {
  var key = 'tdg-report-scroll:' + location.pathname;
  var y = sessionStorage.getItem(key);
  if (y !== null) { window.scrollTo(0, parseInt(y, 10)); }
  setTimeout(function () {
    sessionStorage.setItem(key, String(window.scrollY));
    location.reload();
  }, {{reload_s}} * 1000);
})();
