// Live parts of a page: every element with data-refresh="URL" is replaced by the HTML that URL returns,
// every few seconds, while the tab is visible. Nothing else runs in the browser.
(function () {
  const PERIOD_MS = 3000;
  async function refresh(el) {
    try {
      const answer = await fetch(el.dataset.refresh, { headers: { "X-Fragment": "1" } });
      if (answer.ok) { el.innerHTML = await answer.text(); el.dataset.refreshed = String(Date.now()); }
    } catch (e) { /* the next round tries again */ }
  }
  function tick() {
    if (document.visibilityState === "visible") document.querySelectorAll("[data-refresh]").forEach(refresh);
  }
  setInterval(tick, PERIOD_MS);
})();
