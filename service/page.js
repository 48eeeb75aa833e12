// Operator page of tooldispatch: keeps the server-rendered page up to date
// from the event stream of every session (GET /v1/events) and sends the
// operator's answers (confirm, answer). Text from events is only ever set
// as textContent.
(function () {
  'use strict';

  const KINDS = ['tool_call', 'tool_call_start', 'tool_call_text', 'tool_call_end', 'exec_error',
    'tool_result', 'tool_confirm', 'tool_skipped', 'tool_deduped', 'schema_returned', 'lagged', 'secret_request',
    'elicitation', 'confirm_decided', 'policy_lowered'];
  const MAX_ROWS = 200;   // call rows per session
  const MAX_EVENTS = 50;  // live events listed per session
  const SEQ_PER_TURN = 1e9; // event n of turn t has seq t*SEQ_PER_TURN+n

  // Plain words for states and statuses, from the server (statusWords).
  let WORDS = {};
  try { WORDS = JSON.parse(document.body.dataset.statusWords || '{}'); } catch (_) { /* codes shown as they are */ }
  const words = (code) => WORDS[code] || code;

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
    q('#nothing-pending').hidden = !!(q('#confirms li.confirm') || q('#questions li'));
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
      el('details', { class: 'live' }, el('summary', { text: 'Live events' }), el('ul', { class: 'events' })));
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
      el('td', { class: 'status', text: words('checking') }));
    const tbody = q('tbody', box);
    tbody.append(row);
    while (tbody.rows.length > MAX_ROWS) tbody.deleteRow(0);
    return row;
  }

  function setStatus(row, status, title) {
    if (!row) return;
    row.dataset.status = status;
    q('td.status', row).textContent = words(status);
    if (title !== undefined) row.title = title.length > 2000 ? title.slice(0, 2000) + '…' : title;
    updateGlance(row.closest('article.session'));
    updateTurnCalls(row.closest('article.session').dataset.session, Number(row.dataset.turn), row.dataset.callId, status);
  }

  // updateTurnCalls shows a call's new state in the call lists of the
  // pending items of its turn.
  function updateTurnCalls(session, turn, callId, status) {
    for (const li of document.querySelectorAll('#confirms li.confirm' + attr('data-session', session) + attr('data-turn', turn))) {
      let tr = q('table.turn-calls tr' + attr('data-call-id', callId), li);
      if (!tr) continue;
      tr.dataset.status = status;
      q('td.status', tr).textContent = (tr.classList.contains('this') ? 'this one: ' : '') + words(status);
    }
  }

  // markReady marks the calls before a confirmation in its turn that are
  // still "checking" as checked: pass 1 checks calls in order, so they
  // passed and wait to run.
  function markReady(ev) {
    const box = sessionBox(ev.session);
    for (const row of box.querySelectorAll('tr.call' + attr('data-turn', ev.turn) + '[data-status="checking"]')) {
      if (row.dataset.callId !== ev.call_id) setStatus(row, 'ready');
    }
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
    for (const [status, n] of counts) p.append(' ', el('span', { class: 'count', 'data-status': status, text: `${n} ${words(status)}` }));
  }

  // logEvent lists an event with its number: turn and place in the turn.
  function logEvent(ev) {
    if (!ev.session) return;
    const list = q('ul.events', sessionBox(ev.session));
    const parts = [ev.event, ev.call_id, ev.tool, ev.status && words(ev.status)].filter(Boolean);
    const n = ev.seq ? `${ev.turn || Math.floor(ev.seq / SEQ_PER_TURN)}.${ev.seq % SEQ_PER_TURN}` : '–';
    list.prepend(el('li', {}, el('span', { class: 'seq', text: n, title: ev.seq ? `event ${ev.seq}` : '' }), ' ', parts.join(' ')));
    while (list.children.length > MAX_EVENTS) list.lastElementChild.remove();
  }

  // Pending confirmations and questions.

  function pendingSel(kind, session, callId) {
    return `#${kind} li` + attr('data-session', session) + attr('data-call-id', callId);
  }

  function removePending(kind, session, callId, turn) {
    const li = q(pendingSel(kind, session, callId));
    if (li) li.remove();
    if (turn !== undefined) forget(kind, session, turn, callId);
    else if (li) forget(kind, session, li.dataset.turn, callId);
    if (kind === 'confirms') removeNext(session, callId);
  }

  // removeNext removes the previews of the calls queued after a
  // confirmation: the next one asked brings its own.
  function removeNext(session, callId) {
    for (const li of document.querySelectorAll('#confirms li.next' + attr('data-session', session) + attr('data-after', callId))) li.remove();
  }

  function what(p, badge) {
    const w = el('div', { class: 'what' });
    if (badge) w.append(el('span', { class: 'badge', text: badge }), ' ');
    w.append('session ', el('span', { class: 'session-id', text: p.session }), ` · turn ${p.turn} · `,
      el('code', { class: 'tool', text: p.tool }), ' · call ', el('code', { class: 'call-id', text: p.call_id }));
    return w;
  }

  // change shows what a call would change besides a diff: the MCP server,
  // the command line, the request line.
  function change(p) {
    const out = [];
    if (p.mcp_server) out.push(el('p', { class: 'mcp-server' }, 'MCP server ', el('code', { text: p.mcp_server })));
    if (p.command) out.push(el('pre', { class: 'command', text: '$ ' + p.command }));
    if (p.request) out.push(el('pre', { class: 'request', text: p.request }));
    return out;
  }

  // turnOf finds the turn of p among those a listing gave (include=turn).
  function turnOf(turns, p) {
    return (turns || []).find((t) => t.session === p.session && t.turn === p.turn) || null;
  }

  function turnText(t) {
    if (!t || !t.text) return el('p', { class: 'turn-text none', text: 'The model gave no text with this turn.' });
    return el('figure', { class: 'turn-text' }, el('figcaption', { text: "The model's text with this turn" }),
      el('blockquote', { text: t.text }));
  }

  function turnCalls(p, t) {
    if (!t || !t.calls || t.calls.length === 0) return [];
    const tbody = el('tbody');
    for (const c of t.calls) {
      const mine = c.call_id === p.call_id;
      const tr = el('tr', { 'data-call-id': c.call_id, 'data-status': c.status },
        el('td', { class: 'call-id' }, el('code', { text: c.call_id })),
        el('td', { class: 'tool' }, el('code', { text: c.tool })),
        el('td', { class: 'status', text: (mine ? 'this one: ' : '') + (c.words || words(c.status)) }));
      if (mine) tr.className = 'this';
      tbody.append(tr);
    }
    if (t.calls_omitted) {
      tbody.append(el('tr', { class: 'omitted' }, el('td', { colSpan: 3, text: `and ${t.calls_omitted} more calls` })));
    }
    const d = el('details', { class: 'turn-calls' }, el('summary', { text: "This turn's calls" }),
      el('table', { class: 'turn-calls' }, tbody));
    d.open = true;
    return [d];
  }

  const FILE_TOOLS = ['edit_file', 'remove_file', 'restore_file'];

  // nextItem previews a call queued after p that will ask when its turn
  // comes.
  function nextItem(p, n) {
    const args = el('details', { class: 'args-box' }, el('summary', { text: 'Arguments' }),
      el('pre', { class: 'args', text: n.arguments || '' }));
    if (!n.command && !n.request) args.open = true;
    const text = el('p', { class: 'next-text' }, 'Asked once ', el('code', { text: p.call_id }),
      ' above is answered (calls are asked one at a time, in order)' +
      (FILE_TOOLS.includes(n.tool) ? '; its diff is computed then.' : '.'));
    return el('li', { class: 'next', 'data-session': p.session, 'data-call-id': n.call_id, 'data-after': p.call_id,
      'data-turn': String(p.turn) },
    what({ session: p.session, turn: p.turn, tool: n.tool, call_id: n.call_id }, 'next'), text, ...change(n), args);
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

  // hasDeadline tells a confirmation that times out from one that waits
  // until it is answered (no timeout_at, or the zero time).
  function hasDeadline(at) {
    return !!at && !at.startsWith('0001-');
  }

  // sinceKey is an RFC 3339 time to the nanosecond: milliseconds, then
  // the nanoseconds below them.
  function sinceKey(s) {
    const m = /\.(\d+)/.exec(s || '');
    return [Date.parse(s), Number(m ? (m[1] + '000000000').slice(3, 9) : 0)];
  }

  // listedBefore orders items as the server lists them: by the time they
  // were asked, then session, then call id.
  function listedBefore(a, b) {
    const ta = sinceKey(a.since), tb = sinceKey(b.since);
    if (ta[0] !== tb[0]) return ta[0] < tb[0];
    if (ta[1] !== tb[1]) return ta[1] < tb[1];
    if (a.session !== b.session) return a.session < b.session;
    return a.callId < b.callId;
  }

  // placeConfirm puts a new item where the listing has it, so that items
  // from events and from later pages keep one order.
  function placeConfirm(li) {
    for (const other of document.querySelectorAll('#confirms li.confirm')) {
      if (listedBefore(li.dataset, other.dataset)) {
        other.before(li);
        return;
      }
    }
    q('#confirms').append(li);
  }

  // addConfirm shows a pending confirmation with its turn t (its text and
  // calls), then the previews of the calls queued after it that will ask
  // (replacing any shown before).
  function addConfirm(p, t) {
    let li = q(pendingSel('confirms', p.session, p.call_id));
    if (!li) {
      const extra = change(p);
      if (p.diff) extra.push(diffBlock(p.diff));
      if (p.note) extra.push(el('p', { class: 'diff-note', text: p.note }));
      const args = el('details', { class: 'args-box' }, el('summary', { text: 'Arguments' }),
        el('pre', { class: 'args', text: p.arguments }));
      if (!p.diff && !p.command && !p.request) args.open = true;
      const timing = el('p', { class: 'timing', 'data-since': p.since || '' });
      if (hasDeadline(p.timeout_at)) timing.dataset.timeoutAt = p.timeout_at;
      li = el('li', { class: 'confirm', 'data-session': p.session, 'data-call-id': p.call_id,
        'data-args-hash': p.args_hash, 'data-turn': String(p.turn), 'data-since': p.since || '', tabIndex: 0 },
      what(p, p.deferred ? 'deferred' : ''), turnText(t),
      el('p', { class: 'question-text', text: p.question }),
      ...extra, args, timing,
      el('div', { class: 'actions' },
        el('button', { type: 'button', class: 'approve', text: 'Approve' }),
        el('button', { type: 'button', class: 'deny', text: 'Deny' }),
        el('input', { type: 'text', class: 'deny-reason', maxLength: 500,
          placeholder: 'reason for denying (optional)', ariaLabel: 'Reason for denying, sent to the model' }),
        el('span', { class: 'note', role: 'status' })),
      ...turnCalls(p, t));
      placeConfirm(li);
    }
    removeNext(p.session, p.call_id);
    const next = t && t.asking === p.call_id ? (t.next || []) : [];
    li.after(...next.map((n) => nextItem(p, n)));
    tickTimings();
  }

  // answerFields: a text area for ask_user; for an MCP server's request
  // for input the schema it asks to match and a text area for the JSON
  // object of its fields; for store_secret a hidden value field and the
  // proposed origins, each of which may be unticked.
  function answerFields(p) {
    if (p.schema) {
      return [el('details', { class: 'args-box', open: true }, el('summary', { text: 'Requested fields (JSON Schema)' }),
        el('pre', { class: 'args', text: JSON.stringify(p.schema, null, 2) })),
      el('textarea', { class: 'answer-text', rows: 3, required: true, placeholder: '{"field": "value"}',
        ariaLabel: 'Answer: a JSON object of the requested fields' })];
    }
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
    if (p.schema) attrs['data-elicit'] = 'true';
    // Who asks, and a warning when a server asks for what looks like a
    // secret: shown as text, above the question.
    const notes = p.note ? [el('p', { class: p.note.includes('Warning:') ? 'elicit-note warning' : 'elicit-note', text: p.note })] : [];
    const decline = p.schema ? [el('button', { type: 'button', class: 'decline', text: 'Decline' })] : [];
    q('#questions').append(el('li', attrs,
      what(p), ...notes,
      el('p', { class: 'question-text', text: p.question }),
      el('form', { class: 'answer-form' },
        ...answerFields(p),
        el('button', { type: 'submit', class: 'answer', text: 'Answer' }),
        ...decline,
        el('span', { class: 'note', role: 'status' }))));
  }

  document.addEventListener('click', async (e) => {
    const btn = e.target.closest('li.question button.decline');
    if (!btn) return;
    const li = btn.closest('li.question');
    const note = q('.note', li);
    li.querySelectorAll('button').forEach((b) => { b.disabled = true; });
    const res = await post(callURL(li, 'answer'), { declined: true });
    note.textContent = res.ok ? 'declined' : (res.error || `failed (${res.status})`);
    if (res.ok) li.dataset.answered = 'declined';
    else li.querySelectorAll('button').forEach((b) => { b.disabled = false; });
  });

  // The pending list, a page at a time (GET /v1/pending): the first page
  // comes with the page, "Show more" reads the next, and events add or
  // remove single items; nothing reads the whole list again.

  let cursor = q('#confirms').dataset.nextCursor || '';
  let loadingMore = false;

  function setCursor(c) {
    cursor = c || '';
    q('#pending-more-box').hidden = !cursor;
  }

  async function getPending(params) {
    try {
      const r = await fetch('v1/pending?' + new URLSearchParams(params),
        { credentials: 'same-origin', headers: { Accept: 'application/json' } });
      if (!r.ok) return null;
      return await r.json();
    } catch (_) {
      return null;
    }
  }

  // gone remembers the items that left the lists (by list, session, turn
  // and call), so that the answer to a request already on its way does
  // not bring one back.
  const gone = new Set();
  const goneKey = (kind, session, turn, callId) => [kind, session, turn, callId].join('\u0000');
  function forget(kind, session, turn, callId) {
    gone.add(goneKey(kind, session, String(turn), callId));
    if (gone.size > 4096) gone.delete(gone.values().next().value);
  }
  const isGone = (kind, p) => gone.has(goneKey(kind, p.session, String(p.turn), p.call_id));

  function showPending(data) {
    for (const p of data.confirmations || []) {
      if (!isGone('confirms', p)) addConfirm(p, turnOf(data.turns, p));
    }
    for (const p of data.questions || []) {
      if (!isGone('questions', p)) addQuestion(p);
    }
    updateEmpty();
  }

  async function moreConfirms() {
    if (!cursor || loadingMore) return;
    loadingMore = true;
    const note = q('#pending-more-box .note');
    note.textContent = 'loading…';
    const data = await getPending({ cursor, include: 'turn' });
    loadingMore = false;
    if (!data) {
      note.textContent = 'could not load more; try again';
      return;
    }
    note.textContent = '';
    showPending(data);
    setCursor(data.next_cursor);
  }

  document.addEventListener('click', (e) => {
    if (e.target.closest('#pending-more')) moreConfirms();
  });

  // showCall shows what the server lists of a call an event named (a
  // confirmation with its turn, or a question); the calls of one session
  // named within a moment are read together.
  const wanted = new Map();
  let wantedTimer = 0;
  function showCall(session, callId) {
    if (!wanted.has(session)) wanted.set(session, new Set());
    wanted.get(session).add(callId);
    if (!wantedTimer) wantedTimer = setTimeout(readWanted, 50);
  }

  async function readWanted() {
    wantedTimer = 0;
    const batch = [...wanted];
    wanted.clear();
    for (const [session, ids] of batch) {
      const params = ids.size === 1 ? { session, call_id: [...ids][0], include: 'turn' }
        : { session, include: 'turn', limit: '200' };
      const data = await getPending(params);
      if (!data) continue;
      data.confirmations = data.confirmations.filter((p) => ids.has(p.call_id));
      data.questions = (data.questions || []).filter((p) => ids.has(p.call_id));
      showPending(data);
    }
  }

  // reloadPending reads the first page again, after the event stream was
  // down (what changed meanwhile is not known).
  async function reloadPending() {
    const data = await getPending({ include: 'turn' });
    if (!data) return;
    for (const li of document.querySelectorAll('#confirms li, #questions li')) li.remove();
    showPending(data);
    setCursor(data.next_cursor);
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
      removePending('confirms', li.dataset.session, li.dataset.callId);
      updateEmpty();
    } else if (res.status === 404 || res.status === 409) {
      note.textContent = res.error || 'no longer pending';
      setTimeout(() => { removePending('confirms', li.dataset.session, li.dataset.callId); updateEmpty(); }, 1500);
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
        // The server's listing carries the diff, the command line, the
        // timeout and the turn the event lacks; a deferred one is listed
        // once committed (tool_result awaiting_approval).
        if (ev.status !== 'awaiting_approval') showCall(ev.session, ev.call_id);
        setStatus(callRow(ev, true), 'confirm');
        markReady(ev);
        break;
      case 'tool_call_start':
        removePending('confirms', ev.session, ev.call_id, ev.turn);
        setStatus(callRow(ev, true), 'running');
        if (ev.tool === 'ask_user') showCall(ev.session, ev.call_id);
        break;
      case 'secret_request':
      case 'elicitation':
        showCall(ev.session, ev.call_id);
        break;
      case 'confirm_decided':
        // Answered (here, elsewhere or by the API), timed out or canceled:
        // it no longer waits.
        removePending('confirms', ev.session, ev.call_id, ev.turn);
        {
          const row = callRow(ev, false);
          if (row && row.dataset.status === 'confirm') setStatus(row, ev.status || 'decided');
        }
        break;
      case 'tool_skipped':
        removePending('confirms', ev.session, ev.call_id, ev.turn);
        setStatus(callRow(ev, true), 'skipped');
        break;
      case 'tool_deduped':
        setStatus(callRow(ev, true), 'deduped');
        break;
      case 'schema_returned':
        setStatus(callRow(ev, true), 'schema_returned');
        break;
      case 'tool_call_end':
        removePending('questions', ev.session, ev.call_id, ev.turn);
        setStatus(callRow(ev, true), ev.status || 'ended');
        break;
      case 'tool_result':
        if (ev.status === 'awaiting_approval') {
          // Committed with its stored approval: the server lists it now.
          showCall(ev.session, ev.call_id);
        } else {
          removePending('confirms', ev.session, ev.call_id, ev.turn);
        }
        removePending('questions', ev.session, ev.call_id, ev.turn);
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
      if (dropped) reloadPending();
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
      if (Number.isNaN(until)) text += ' · waits until answered';
      else {
        const at = new Date(until).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' });
        text += until > now ? ` · times out in ${span(until - now)} (${at})` : ` · timing out (${at})`;
      }
      p.textContent = text;
    }
  }

  tickTimings();
  setInterval(tickTimings, 1000);
  connect();
})();
