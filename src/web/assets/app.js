// keel web: the page. It speaks the daemon's own protocol (JSON-RPC 2.0, protocol v2) over
// one WebSocket that the server relays line for line: hello, daemon/status for the list,
// session/attach with a cursor for a session's numbered events, pi's commands to act.
// Model and user text is only ever set as textContent; a finished assistant message is
// rendered by the HTML export's renderer (POST /render, sanitized there) and parsed inertly
// (DOMParser documents run nothing; the page's CSP allows no inline script either).
'use strict';
(() => {
  const $ = (id) => document.getElementById(id);
  const PROTOCOL = 2;
  const st = {
    ws: null,
    next: 1,
    pending: new Map(),
    retry: 0,
    open: null, // {id, epoch, seq}
    running: false,
    cells: new Map(), // tool call id -> output element
    assistant: null, // {text, thinking, body, raw}
    listTimer: null,
  };
  // What tests read: every seq received for the open session, in order (before any check).
  window.keel = { seqs: [], attaches: [] };

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function status(text) {
    $('status').textContent = text;
  }

  function error(text) {
    const e = $('error');
    e.textContent = text;
    e.hidden = !text;
  }

  // The token of the fragment is traded for the cookie once, then taken out of the address
  // bar and the history.
  async function auth() {
    const m = /^#t=([0-9a-f]{64})$/.exec(location.hash);
    if (!m) return;
    history.replaceState(null, '', location.pathname + location.search);
    const r = await fetch('/auth', {
      method: 'POST',
      headers: { 'X-Keel': '1', 'Content-Type': 'application/json' },
      body: JSON.stringify({ token: m[1] }),
      credentials: 'same-origin',
    });
    if (!r.ok) error('The token was refused: open the URL `keel web` printed.');
  }

  function call(method, params) {
    return new Promise((resolve, reject) => {
      const ws = st.ws;
      if (!ws || ws.readyState !== WebSocket.OPEN) {
        reject(new Error('not connected'));
        return;
      }
      const id = st.next++;
      st.pending.set(id, { resolve, reject });
      ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
    });
  }

  function connect() {
    const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
    const ws = new WebSocket(`${scheme}://${location.host}/ws`);
    st.ws = ws;
    ws.onopen = async () => {
      st.retry = 0;
      status('connected');
      try {
        await call('daemon/hello', {
          protocolVersion: PROTOCOL,
          client: { name: 'keel-web', version: '1' },
          interactive: true,
        });
        error('');
        route();
      } catch (e) {
        error(`The daemon refused this page: ${e.message}`);
      }
    };
    ws.onmessage = (m) => frame(JSON.parse(m.data));
    ws.onclose = () => {
      if (st.ws !== ws) return;
      st.ws = null;
      for (const p of st.pending.values()) p.reject(new Error('disconnected'));
      st.pending.clear();
      status('disconnected: reconnecting…');
      const delay = Math.min(5000, 200 * 2 ** st.retry++);
      setTimeout(() => { if (!st.ws) connect(); }, delay);
    };
  }

  function frame(f) {
    if (f.id !== undefined && f.id !== null && st.pending.has(f.id)) {
      const p = st.pending.get(f.id);
      st.pending.delete(f.id);
      if (f.error) p.reject(Object.assign(new Error(f.error.message), { code: f.error.code }));
      else p.resolve(f.result);
      return;
    }
    const params = f.params || {};
    if (f.method === 'session/event' && st.open && params.sessionId === st.open.id) {
      window.keel.seqs.push(params.seq);
      // A replay never repeats, but a late frame of a closed attach may: keep one copy.
      if (params.epoch === st.open.epoch && params.seq <= st.open.seq) return;
      st.open.epoch = params.epoch;
      st.open.seq = params.seq;
      // Only what happens now, never what a replay or a reload shows again.
      if (st.open.head !== undefined && params.seq > st.open.head) notifyOf(params.event);
      apply(params.event);
    } else if (f.method === 'daemon/lagged' && st.ws) {
      st.ws.close(); // reconnects and re-attaches from the cursor
    } else if (f.method === 'session/replaced' && st.open && params.sessionId === st.open.id) {
      location.hash = `s=${encodeURIComponent(params.newSessionId || params.sessionId)}`;
    }
  }

  // The view the address names: #s=ID a session, else the list.
  function route() {
    const m = /^#s=(.+)$/.exec(location.hash);
    const id = m ? decodeURIComponent(m[1]) : null;
    if (!st.ws || st.ws.readyState !== WebSocket.OPEN) return;
    if (id) openSession(id);
    else showList();
  }

  async function showList() {
    if (st.open) {
      const old = st.open.id;
      st.open = null;
      call('session/detach', { sessionId: old }).catch(() => {});
    }
    $('session-view').hidden = true;
    $('list-view').hidden = false;
    $('title').textContent = '';
    clearTimeout(st.listTimer);
    let result;
    try {
      result = await call('daemon/status', {});
    } catch (e) {
      return;
    }
    const ul = $('sessions');
    ul.replaceChildren();
    for (const s of result.sessions || []) {
      const b = el('button');
      b.type = 'button';
      b.dataset.session = s.sessionId;
      b.append(el('span', 'name', s.name || s.sessionId));
      const meta = [s.cwd, s.state, `${s.clients} client${s.clients === 1 ? '' : 's'}`];
      b.append(el('span', 'meta', meta.join(' · ')));
      b.onclick = () => { location.hash = `s=${encodeURIComponent(s.sessionId)}`; };
      const li = el('li');
      li.append(b);
      ul.append(li);
    }
    $('empty').hidden = (result.sessions || []).length > 0;
    if (!$('list-view').hidden) st.listTimer = setTimeout(showList, 3000);
  }

  async function openSession(id) {
    clearTimeout(st.listTimer);
    const again = st.open && st.open.id === id;
    if (!again) {
      st.open = { id, epoch: null, seq: 0 };
      clearTranscript();
      const result = await call('daemon/status', {}).catch(() => null);
      const live = result && (result.sessions || []).find((s) => s.sessionId === id);
      // From the stream's start when the daemon's ring still holds it: an exact replay.
      if (live) st.open.epoch = live.epoch;
    }
    $('list-view').hidden = true;
    $('session-view').hidden = false;
    $('title').textContent = id;
    await attach();
  }

  async function attach() {
    const o = st.open;
    const params = { sessionId: o.id };
    if (o.epoch) params.cursor = { epoch: o.epoch, seq: o.seq };
    let r;
    try {
      r = await call('session/attach', params);
    } catch (e) {
      if (e.code) error(`Cannot open ${o.id}: ${e.message}`);
      return;
    }
    window.keel.attaches.push({ mode: r.mode, from: o.seq, seq: r.seq });
    o.epoch = r.epoch;
    o.head = r.seq;
    if (r.mode === 'snapshot') {
      // The snapshot is as of `seq`; live events follow from seq + 1.
      clearTranscript();
      snapshot(r.snapshot || {});
      o.seq = r.seq;
    }
    // A replay's `seq` is the head: the events after the cursor up to it follow this answer,
    // so the cursor moves only as they are applied.
  }

  function clearTranscript() {
    $('transcript').replaceChildren();
    $('dialogs').replaceChildren();
    st.cells.clear();
    st.assistant = null;
    setRunning(false);
  }

  function setRunning(on) {
    st.running = on;
    $('abort').hidden = !on;
    $('send').textContent = on ? 'Steer' : 'Send';
    status(on ? 'running' : 'idle');
  }

  // ---- rendering -------------------------------------------------------------------------

  function textOf(content) {
    if (typeof content === 'string') return content;
    if (!Array.isArray(content)) return '';
    return content.filter((c) => c && c.type === 'text').map((c) => c.text).join('');
  }

  function add(node) {
    const t = $('transcript');
    const atEnd = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
    t.append(node);
    if (atEnd) window.scrollTo(0, document.body.scrollHeight);
    return node;
  }

  function userCell(text) {
    const m = el('div', 'msg user');
    m.append(el('div', 'role', 'You'), el('div', 'text', text));
    add(m);
  }

  function assistantCell() {
    const m = el('div', 'msg assistant');
    const thinking = el('details', 'thinking');
    thinking.append(el('summary', null, 'Thinking'), el('div', 'text'));
    thinking.hidden = true;
    const body = el('div', 'text');
    m.append(el('div', 'role', 'Assistant'), thinking, body);
    add(m);
    return { body, thinking, raw: '' };
  }

  // The export's renderer, through the server; the text stays as text if that fails.
  async function markdown(node, text) {
    node.textContent = text;
    if (!text) return;
    try {
      const r = await fetch('/render', {
        method: 'POST',
        headers: { 'X-Keel': '1', 'Content-Type': 'application/json' },
        body: JSON.stringify({ text }),
        credentials: 'same-origin',
      });
      if (!r.ok) return;
      const { html } = await r.json();
      const doc = new DOMParser().parseFromString(html, 'text/html');
      node.className = '';
      node.replaceChildren(...Array.from(doc.body.childNodes, (n) => document.importNode(n, true)));
    } catch (e) {
      // The text is shown as it came.
    }
  }

  function argsText(name, args) {
    if (!args || typeof args !== 'object') return '';
    if (typeof args.command === 'string') return args.command;
    if (typeof args.path === 'string' && Object.keys(args).length === 1) return args.path;
    return JSON.stringify(args, null, 2);
  }

  function toolCell(id, name, args) {
    if (st.cells.has(id)) return st.cells.get(id);
    const t = el('div', 'tool');
    t.dataset.call = id;
    const out = el('pre', 'result');
    out.hidden = true;
    t.append(el('span', 'name', name), el('pre', 'args', argsText(name, args)), out);
    add(t);
    st.cells.set(id, out);
    return out;
  }

  function toolOutput(id, result, isError) {
    const out = st.cells.get(id);
    if (!out) return;
    const text = result && typeof result === 'object' ? textOf(result.content) : String(result || '');
    out.textContent = text;
    out.hidden = !text;
    out.classList.toggle('error', !!isError);
  }

  function note(text) {
    add(el('div', 'note', text));
  }

  function dialog(req) {
    if (req.method === 'notify') {
      note(req.message || req.title || '');
      return;
    }
    const box = el('div', 'dialog');
    box.dataset.dialog = req.id;
    box.append(el('div', 'question', req.title || 'Question'));
    if (req.message) box.append(el('pre', null, req.message));
    if (req.timeout) {
      const until = new Date(Date.now() + req.timeout);
      box.append(el('div', 'note', `Answer by ${until.toLocaleTimeString()}`));
    }
    const buttons = el('div', 'buttons');
    const answer = (fields) => () => {
      call('extension_ui_response', Object.assign({ sessionId: st.open.id, id: req.id }, fields))
        .catch((e) => { if (e.code !== -32014) error(e.message); })
        .finally(() => box.remove());
    };
    if (req.method === 'confirm') {
      const yes = el('button', 'primary', 'Allow');
      yes.type = 'button';
      yes.dataset.answer = 'allow';
      yes.onclick = answer({ confirmed: true });
      const no = el('button', 'deny', 'Deny');
      no.type = 'button';
      no.dataset.answer = 'deny';
      no.onclick = answer({ confirmed: false });
      buttons.append(yes, no);
    } else if (req.method === 'select') {
      for (const option of req.options || []) {
        const b = el('button', null, option);
        b.type = 'button';
        b.onclick = answer({ value: option });
        buttons.append(b);
      }
    } else {
      const input = el('input');
      input.setAttribute('aria-label', req.title || 'Answer');
      const ok = el('button', 'primary', 'Answer');
      ok.type = 'button';
      ok.onclick = () => answer({ value: input.value })();
      buttons.append(input, ok);
    }
    const cancel = el('button', null, 'Dismiss');
    cancel.type = 'button';
    cancel.onclick = answer({ cancelled: true });
    if (req.method !== 'confirm') buttons.append(cancel);
    box.append(buttons);
    $('dialogs').append(box);
  }

  function dropDialog(id) {
    for (const d of $('dialogs').querySelectorAll('.dialog')) {
      if (d.dataset.dialog === id) d.remove();
    }
  }

  function message(m) {
    if (!m) return;
    if (m.role === 'user') userCell(textOf(m.content));
    else if (m.role === 'assistant') {
      const text = textOf(m.content);
      if (text) markdown(assistantCell().body, text);
      for (const c of m.content || []) {
        if (c && c.type === 'toolCall') toolCell(c.id, c.name, c.arguments);
      }
    } else if (m.role === 'toolResult') toolOutput(m.toolCallId, m, m.isError);
  }

  function snapshot(s) {
    for (const m of s.messages || []) message(m);
    const streaming = s.streaming;
    if (streaming) {
      if (streaming.message) {
        st.assistant = assistantCell();
        st.assistant.raw = textOf(streaming.message.content);
        st.assistant.body.textContent = st.assistant.raw;
      }
      for (const t of streaming.tools || []) {
        toolCell(t.toolCallId, t.toolName, t.args);
        if (t.partialResult) toolOutput(t.toolCallId, t.partialResult, false);
      }
      setRunning(true);
    }
    for (const u of s.pendingUi || []) dialog(u);
  }

  function apply(ev) {
    switch (ev.type) {
      case 'agent_start':
        setRunning(true);
        break;
      case 'agent_end':
      case 'agent_settled':
        setRunning(false);
        $('dialogs').replaceChildren();
        break;
      case 'message_start':
        if (ev.message && ev.message.role === 'user') userCell(textOf(ev.message.content));
        else if (ev.message && ev.message.role === 'assistant') st.assistant = assistantCell();
        break;
      case 'message_update': {
        const a = st.assistant || (st.assistant = assistantCell());
        const d = ev.assistantMessageEvent || {};
        if (d.type === 'text_delta') {
          a.raw += d.delta;
          a.body.textContent = a.raw;
        } else if (d.type === 'thinking_delta') {
          a.thinking.hidden = false;
          a.thinking.lastChild.textContent += d.delta;
        }
        break;
      }
      case 'message_end':
        if (ev.message && ev.message.role === 'assistant') {
          const a = st.assistant || assistantCell();
          markdown(a.body, textOf(ev.message.content));
          st.assistant = null;
        }
        break;
      case 'tool_execution_start':
        dropDialog(ev.toolCallId);
        toolCell(ev.toolCallId, ev.toolName, ev.args);
        break;
      case 'tool_execution_update':
        toolOutput(ev.toolCallId, ev.partialResult, false);
        break;
      case 'tool_execution_end':
        dropDialog(ev.toolCallId);
        toolCell(ev.toolCallId, ev.toolName, ev.args);
        toolOutput(ev.toolCallId, ev.result, ev.isError);
        break;
      case 'extension_ui_request':
        dialog(ev);
        break;
      case 'dialog_resolved':
        dropDialog(ev.id);
        break;
      case 'todo_update':
        note(`Todo: ${(ev.todos || []).map((t) => `${t.status === 'completed' ? '✓' : '·'} ${t.content}`).join('  ')}`);
        break;
      case 'job_started':
        note(`Job started: ${ev.job && ev.job.command ? ev.job.command : ''}`);
        break;
      case 'job_ended':
        note(`Job ended: ${ev.job && ev.job.command ? ev.job.command : ''}`);
        break;
      case 'session_ended':
        note(`Session ended (${ev.reason})`);
        break;
      default:
        break;
    }
  }

  // ---- notifications ----------------------------------------------------------------------

  // "Waiting for approval" and "Run finished", when the page is not in front and the user
  // allowed notifications (the Notify button asks).
  function notifyOf(ev) {
    const title = ev.type === 'extension_ui_request' && ev.method === 'confirm'
      ? 'keel: waiting for approval'
      : ev.type === 'agent_settled' ? 'keel: run finished' : null;
    if (!title || !('Notification' in window) || Notification.permission !== 'granted') return;
    if (document.visibilityState === 'visible' && document.hasFocus()) return;
    try {
      // Shown as text by the system; the tag keeps one per session.
      new Notification(title, { body: ev.title || st.open.id, tag: `keel-${st.open.id}` });
    } catch (e) {
      // Some browsers allow notifications only from a service worker.
    }
  }

  function notifyButton() {
    const b = $('notify');
    b.hidden = !('Notification' in window) || Notification.permission !== 'default';
    b.onclick = () => Notification.requestPermission().then(notifyButton);
  }

  // ---- input -----------------------------------------------------------------------------

  $('composer').addEventListener('submit', async (e) => {
    e.preventDefault();
    const box = $('prompt');
    const text = box.value.trim();
    if (!text || !st.open) return;
    box.value = '';
    try {
      await call(st.running ? 'steer' : 'prompt', { sessionId: st.open.id, message: text });
    } catch (err) {
      error(err.message);
      box.value = text;
    }
  });
  $('prompt').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      $('composer').requestSubmit();
    }
  });
  $('abort').addEventListener('click', () => {
    if (st.open) call('abort', { sessionId: st.open.id }).catch((e) => error(e.message));
  });
  window.addEventListener('hashchange', route);
  // A phone tab that slept: reconnect at once rather than at the next retry.
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible' && !st.ws) connect();
  });

  notifyButton();
  auth().finally(connect);
})();
