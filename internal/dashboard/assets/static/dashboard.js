// The page's live part comes from the server over one Server-Sent Events
// stream; the buttons POST the plugin's actions with the page's token.
(() => {
  const token = document.querySelector('meta[name="rainbow-token"]').content;
  const live = document.getElementById('live');
  const result = document.getElementById('result');
  const connection = document.getElementById('connection');

  const events = new EventSource(live.dataset.stream);
  events.addEventListener('live', (e) => { live.innerHTML = e.data; });
  events.onopen = () => { connection.textContent = 'live'; connection.className = 'connection up'; };
  // EventSource reconnects by itself.
  events.onerror = () => { connection.textContent = 'reconnecting…'; connection.className = 'connection down'; };

  document.addEventListener('click', async (e) => {
    const button = e.target.closest('button[data-verb]');
    if (!button || button.disabled) return;
    button.disabled = true;
    let ok = false;
    let message;
    try {
      const r = await fetch(button.dataset.url, { method: 'POST', headers: { 'X-Rainbow-Token': token } });
      const body = await r.json();
      ok = body.ok;
      message = body.message;
    } catch (err) {
      message = 'the dashboard did not answer: ' + err;
    }
    result.hidden = false;
    result.className = ok ? 'result ok' : 'result error';
    result.dataset.verb = button.dataset.verb;
    result.textContent = button.textContent + ': ' + message;
    button.disabled = false;
  });
})();
