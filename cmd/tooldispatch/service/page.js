// Operator page of tooldispatch: keeps the server-rendered page up to date
// from the event stream of every session (GET /v1/events) and sends the
// operator's answers (confirm, answer). Text from events is only ever set
// as textContent.
(function () {
  'use strict';

  const KINDS = ['tool_call', 'tool_call_start', 'tool_call_text', 'tool_call_end', 'exec_error',
    'tool_result', 'tool_confirm', 'tool_skipped', 'tool_deduped', 'schema_returned', 'lagged', 'secret_request',
    'confirm_decided'];
  const MAX_ROWS = 200;   // call rows per session
  const MAX_EVENTS = 50;  // live events listed per session

  const q = (sel, root) => (root || document).querySelector(sel);
  const attr = (name, value) => `[${name}="${CSS.escape(String(value))}"]`;

  function el(tag, props, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k.startsWith('data-')) e.setAttribute(k, v);
      else e[k] = v;
    }
    for (const c of children) e.append(c);
    return e;
  }

  function setConn(state) {
    const c = q('#conn');
    c.dataset.state = state;
    c.textContent = state;
  }

  function updateEmpty() {
    q('#nothing-pending').hidden = !!(q('#confirms li') || q('#questions li'));
    q('#no-sessions').hidden = !!q('article.session');
  }

  // Sessions and their calls.

  function sessionBox(session) {
    let box = q('article.session' + attr('data-session', session));
    if (box) return box;
    const tbody = el('tbody');
    box = el('article', { class: 'session', 'data-session': session },
      el('h3', { text: session }),
      el('p', { class: 'glance' }),
      el('table', { class: 'calls' },
        el('thead', {}, el('tr', {}, el('th', { text: 'turn' }), el('th', { text: 'call' }),
          el('th', { text: 'tool' }), el('th', { text: 'status' }))),
        tbody),
      el('details', { class: 'live' }, el('summary', { text: 'Live events' }), el('ol', { class: 'events' })));
    q('#session-list').prepend(box);
    return box;
  }

  function callRow(ev, create) {
    const box = sessionBox(ev.session);
    const sel = 'tr.call' + attr('data-turn', ev.turn) + attr('data-call-id', ev.call_id);
    let row = q(sel, box);
    if (row || !create) return row;
    row = el('tr', { class: 'call', 'data-turn': String(ev.turn), 'data-call-id': ev.call_id, 'data-status': 'checking' },
      el('td', { class: 'turn', text: String(ev.turn) }),
      el('td', { class: 'call-id' }, el('code', { text: ev.call_id })),
      el('td', { class: 'tool', text: ev.tool || '' }),
      el('td', { class: 'status', text: 'checking' }));
    const tbody = q('tbody', box);
    tbody.append(row);
    while (tbody.rows.length > MAX_ROWS) tbody.deleteRow(0);
    return row;
  }

  function setStatus(row, status, title) {
    if (!row) return;
    row.dataset.status = status;
    q('td.status', row).textContent = status;
    if (title !== undefined) row.title = title.length > 2000 ? title.slice(0, 2000) + '…' : title;
    updateGlance(row.closest('article.session'));
  }

  // updateGlance counts the statuses of the session's last turn.
  function updateGlance(box) {
    const rows = [...box.querySelectorAll('tr.call')];
    if (rows.length === 0) return;
    const last = Math.max(...rows.map((r) => Number(r.dataset.turn)));
    const counts = new Map();
    for (const r of rows) {
      if (Number(r.dataset.turn) === last) counts.set(r.dataset.status, (counts.get(r.dataset.status) || 0) + 1);
    }
    const p = q('p.glance', box);
    p.replaceChildren(`last turn ${last}:`);
    for (const [status, n] of counts) p.append(' ', el('span', { class: 'count', 'data-status': status, text: `${n} ${status}` }));
  }

  function logEvent(ev) {
    if (!ev.session) return;
    const list = q('ol.events', sessionBox(ev.session));
    const parts = [ev.event, ev.call_id, ev.tool, ev.status].filter(Boolean);
    list.prepend(el('li', { text: parts.join(' ') }));
    while (list.children.length > MAX_EVENTS) list.lastElementChild.remove();
  }

  // Pending confirmations and questions.

  function pendingSel(kind, session, callId) {
    return `#${kind} li` + attr('data-session', session) + attr('data-call-id', callId);
  }

  function removePending(kind, session, callId) {
    const li = q(pendingSel(kind, session, callId));
    if (li) li.remove();
  }

  function what(p) {
    return el('div', { class: 'what' },
      el('span', { class: 'session-id', text: p.session }), ` · turn ${p.turn} · `,
      el('code', { class: 'tool', text: p.tool }), ' · ', el('code', { class: 'call-id', text: p.call_id }));
  }

  // diffBlock shows a diff computed by the server, one span per line,
  // each set as text.
  function diffBlock(diff) {
    const pre = el('pre', { class: 'diff' });
    for (const line of diff.replace(/\n$/, '').split('\n')) {
      let kind = 'ctx';
      if (line.startsWith('+++') || line.startsWith('---')) kind = 'file';
      else if (line.startsWith('@@')) kind = 'hunk';
      else if (line.startsWith('+')) kind = 'add';
      else if (line.startsWith('-')) kind = 'del';
      pre.append(el('span', { class: kind, text: line }), '\n');
    }
    return pre;
  }

  function addConfirm(p) {
    if (q(pendingSel('confirms', p.session, p.call_id))) return;
    const extra = [];
    if (p.command) extra.push(el('pre', { class: 'command', text: '$ ' + p.command }));
    if (p.diff) extra.push(diffBlock(p.diff));
    if (p.note) extra.push(el('p', { class: 'diff-note', text: p.note }));
    const args = el('details', { class: 'args-box' }, el('summary', { text: 'Arguments' }),
      el('pre', { class: 'args', text: p.arguments }));
    if (!p.diff && !p.command) args.open = true;
    const timing = el('p', { class: 'timing', 'data-since': p.since || '', 'data-timeout-at': p.timeout_at || '' });
    q('#confirms').append(el('li', { class: 'confirm', 'data-session': p.session, 'data-call-id': p.call_id,
      'data-args-hash': p.args_hash, 'data-turn': String(p.turn), tabIndex: 0 },
      what(p),
      el('p', { class: 'question-text', text: p.question }),
      timing, ...extra, args,
      el('div', { class: 'actions' },
        el('button', { type: 'button', class: 'approve', text: 'Approve' }),
        el('button', { type: 'button', class: 'deny', text: 'Deny' }),
        el('input', { type: 'text', class: 'deny-reason', maxLength: 500,
          placeholder: 'reason for denying (optional)', ariaLabel: 'Reason for denying, sent to the model' }),
        el('span', { class: 'note', role: 'status' }))));
    tickTimings();
  }

  // answerFields: a text area for ask_user; for store_secret a hidden
  // value field and the proposed origins, each of which may be unticked.
  function answerFields(p) {
    if (!p.secret) return [el('textarea', { class: 'answer-text', rows: 2, required: true, ariaLabel: 'Answer' })];
    const boxes = (p.origins || []).map((o) => el('label', {},
      el('input', { type: 'checkbox', class: 'origin', value: o, checked: true }), ' ', el('code', { text: o })));
    return [el('fieldset', { class: 'origins' }, el('legend', { text: 'May be sent only to' }), ...boxes),
      el('input', { type: 'password', class: 'answer-text', required: true, autocomplete: 'off', ariaLabel: 'Secret value' })];
  }

  function addQuestion(p) {
    if (q(pendingSel('questions', p.session, p.call_id))) return;
    const attrs = { class: 'question', 'data-session': p.session, 'data-call-id': p.call_id, 'data-turn': String(p.turn) };
    if (p.secret) attrs['data-secret'] = p.secret;
    q('#questions').append(el('li', attrs,
      what(p),
      el('p', { class: 'question-text', text: p.question }),
      el('form', { class: 'answer-form' },
        ...answerFields(p),
        el('button', { type: 'submit', class: 'answer', text: 'Answer' }),
        el('span', { class: 'note', role: 'status' }))));
  }

  // refreshPending makes the pending lists match the server's.
  async function refreshPending() {
    let data;
    try {
      const r = await fetch('v1/pending', { credentials: 'same-origin', headers: { Accept: 'application/json' } });
      if (!r.ok) return;
      data = await r.json();
    } catch (_) {
      return;
    }
    const keep = (list) => new Set(list.map((p) => p.session + '\u0000' + p.call_id));
    const confirms = keep(data.confirmations), questions = keep(data.questions);
    for (const li of document.querySelectorAll('#confirms li')) {
      if (!confirms.has(li.dataset.session + '\u0000' + li.dataset.callId)) li.remove();
    }
    for (const li of document.querySelectorAll('#questions li')) {
      if (!questions.has(li.dataset.session + '\u0000' + li.dataset.callId)) li.remove();
    }
    data.confirmations.forEach(addConfirm);
    data.questions.forEach(addQuestion);
    updateEmpty();
  }

  async function post(url, body) {
    try {
      const r = await fetch(url, { method: 'POST', credentials: 'same-origin',
        headers: { 'Content-Type': 'application/json', Accept: 'application/json' }, body: JSON.stringify(body) });
      let data = {};
      try { data = await r.json(); } catch (_) { /* no body */ }
      return { ok: r.ok, status: r.status, error: data.error || '' };
    } catch (e) {
      return { ok: false, status: 0, error: String(e) };
    }
  }

  function callURL(li, what) {
    return `v1/sessions/${encodeURIComponent(li.dataset.session)}/${what}/${encodeURIComponent(li.dataset.callId)}`;
  }

  document.addEventListener('click', async (e) => {
    const btn = e.target.closest('li.confirm button.approve, li.confirm button.deny');
    if (!btn) return;
    const li = btn.closest('li.confirm');
    const approve = btn.classList.contains('approve');
    answerConfirm(li, approve);
  });

  // answerConfirm approves or denies a pending confirmation; a denial
  // carries the reason typed next to Deny, which reaches the model.
  async function answerConfirm(li, approve) {
    if (li.dataset.sending) return;
    li.dataset.sending = '1';
    li.querySelectorAll('button').forEach((b) => { b.disabled = true; });
    const note = q('.note', li);
    note.textContent = 'sending…';
    const typed = (q('input.deny-reason', li) || {}).value || '';
    const res = await post(callURL(li, 'confirm'), {
      approve, args_hash: li.dataset.argsHash, reason: approve ? '' : (typed.trim() || 'denied on the operator page') });
    delete li.dataset.sending;
    if (res.ok) {
      // Answered: it leaves the list now (confirm_decided says so too).
      li.remove();
      updateEmpty();
    } else if (res.status === 404 || res.status === 409) {
      note.textContent = res.error || 'no longer pending';
      setTimeout(() => { li.remove(); updateEmpty(); }, 1500);
    } else {
      note.textContent = res.error || `failed (${res.status})`;
      li.querySelectorAll('button').forEach((b) => { b.disabled = false; });
    }
  }

  document.addEventListener('submit', async (e) => {
    const form = e.target.closest('form.answer-form');
    if (!form) return;
    e.preventDefault();
    const li = form.closest('li.question');
    const btn = q('button.answer', form);
    const note = q('.note', form);
    btn.disabled = true;
    const answer = { text: q('.answer-text', form).value };
    if (li.dataset.secret) {
      const boxes = [...form.querySelectorAll('input.origin')];
      const kept = boxes.filter((b) => b.checked).map((b) => b.value);
      if (boxes.length > 0 && kept.length === 0) {
        note.textContent = 'keep at least one origin, or let the question time out';
        btn.disabled = false;
        return;
      }
      if (kept.length < boxes.length) answer.origins = kept;
    }
    const res = await post(callURL(li, 'answer'), answer);
    if (res.ok && li.dataset.secret) q('.answer-text', form).value = '';
    note.textContent = res.ok ? 'answered' : (res.error || `failed (${res.status})`);
    if (res.ok) li.dataset.answered = 'answered';
    else btn.disabled = false;
  });

  // Events.

  function handle(ev) {
    logEvent(ev);
    switch (ev.event) {
      case 'tool_call':
        setStatus(callRow(ev, true), 'checking');
        break;
      case 'tool_confirm':
        // The server's list carries the diff, the command line and the
        // timeout the event lacks.
        refreshPending();
        setStatus(callRow(ev, true), 'confirm');
        break;
      case 'tool_call_start':
        removePending('confirms', ev.session, ev.call_id);
        setStatus(callRow(ev, true), 'running');
        if (ev.tool === 'ask_user') refreshPending();
        break;
      case 'secret_request':
        refreshPending();
        break;
      case 'confirm_decided':
        // Answered (here, elsewhere or by the API), timed out or canceled:
        // it no longer waits.
        removePending('confirms', ev.session, ev.call_id);
        {
          const row = callRow(ev, false);
          if (row && row.dataset.status === 'confirm') setStatus(row, ev.status || 'decided');
        }
        break;
      case 'tool_skipped':
      case 'tool_deduped':
      case 'schema_returned':
        removePending('confirms', ev.session, ev.call_id);
        setStatus(callRow(ev, true), 'decided');
        break;
      case 'tool_call_end':
        removePending('questions', ev.session, ev.call_id);
        setStatus(callRow(ev, true), 'ended');
        break;
      case 'tool_result':
        if (ev.status === 'awaiting_approval') {
          // Committed with its stored approval: the server lists it now.
          refreshPending();
        } else {
          removePending('confirms', ev.session, ev.call_id);
        }
        removePending('questions', ev.session, ev.call_id);
        setStatus(callRow(ev, true), ev.status, ev.text || '');
        break;
    }
    updateEmpty();
  }

  function connect() {
    const es = new EventSource('v1/events');
    let dropped = false;
    es.onopen = () => {
      setConn('live');
      if (dropped) refreshPending();
    };
    es.onerror = () => {
      dropped = true;
      setConn(es.readyState === EventSource.CLOSED ? 'closed' : 'reconnecting');
    };
    for (const kind of KINDS) {
      es.addEventListener(kind, (m) => {
        let ev;
        try { ev = JSON.parse(m.data); } catch (_) { return; }
        handle(ev);
      });
    }
  }

  // Keyboard: j/k move between confirmations, a approves and d denies the
  // focused one, r goes to its reason field, where Enter denies and Escape
  // goes back to the item.

  function focusedConfirm() {
    return document.activeElement && document.activeElement.closest
      ? document.activeElement.closest('li.confirm') : null;
  }

  function moveFocus(step) {
    const items = [...document.querySelectorAll('#confirms li.confirm')];
    if (items.length === 0) return;
    const at = items.indexOf(focusedConfirm());
    const next = at < 0 ? (step > 0 ? 0 : items.length - 1) : Math.min(items.length - 1, Math.max(0, at + step));
    items[next].focus();
  }

  // focusAfter moves the focus to the item that follows li (or precedes
  // it, at the end), so answering with keys goes down the list.
  function focusAfter(li) {
    const next = li.nextElementSibling || li.previousElementSibling;
    if (next) next.focus();
  }

  document.addEventListener('keydown', (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const t = e.target;
    if (t.matches && t.matches('input.deny-reason')) {
      const li = t.closest('li.confirm');
      if (e.key === 'Enter') { e.preventDefault(); focusAfter(li); answerConfirm(li, false); }
      else if (e.key === 'Escape') { e.preventDefault(); li.focus(); }
      return;
    }
    if (t.matches && t.matches('input, textarea, select, button, [contenteditable]')) return;
    const li = focusedConfirm();
    switch (e.key) {
      case 'j': moveFocus(1); break;
      case 'k': moveFocus(-1); break;
      case 'a': if (li) { focusAfter(li); answerConfirm(li, true); } break;
      case 'd': if (li) { focusAfter(li); answerConfirm(li, false); } break;
      case 'r': if (li) q('input.deny-reason', li).focus(); break;
      default: return;
    }
    e.preventDefault();
  });

  // Waiting times.

  function span(ms) {
    const s = Math.max(0, Math.round(ms / 1000));
    if (s < 60) return `${s}s`;
    const m = Math.floor(s / 60);
    if (m < 60) return `${m}m ${String(s % 60).padStart(2, '0')}s`;
    return `${Math.floor(m / 60)}h ${String(m % 60).padStart(2, '0')}m`;
  }

  function tickTimings() {
    const now = Date.now();
    for (const p of document.querySelectorAll('li.confirm p.timing')) {
      const since = Date.parse(p.dataset.since), until = Date.parse(p.dataset.timeoutAt);
      if (Number.isNaN(since)) continue;
      let text = `waiting ${span(now - since)}`;
      if (!Number.isNaN(until)) {
        const at = new Date(until).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' });
        text += until > now ? ` · times out in ${span(until - now)} (${at})` : ` · timing out (${at})`;
      } else {
        text += ' · waits until answered';
      }
      p.textContent = text;
    }
  }

  tickTimings();
  setInterval(tickTimings, 1000);
  connect();
})();
