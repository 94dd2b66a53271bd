// The voice agent page: microphone → /ws (16 kHz PCM), model audio ← /ws (24 kHz PCM) played
// gap-free, transcript and a per-turn timeline of tool calls from the JSON events.
"use strict";

const OUTPUT_RATE = 24000;
const PLAYBACK_LEAD = 0.05; // seconds of slack before the first chunk of a reply plays
// After Stop, the server lets running calls settle (its shutdown grace, 5 s by default) and
// sends their outcomes before it closes; past this the page closes the socket itself.
const STOP_WAIT_MS = 15000;

const stats = {
  state: "idle",
  bytesSent: 0,
  framesSent: 0,
  bytesReceived: 0,
  chunksReceived: 0,
  chunksPlayed: 0,
  callsStarted: 0,
  callsSettled: 0,
  turnsCompleted: 0,
  interruptions: 0,
  errors: [],
};
const turns = new Map(); // turn number -> {calls: [{id, name, outcome, latency}]}
const calls = new Map(); // call id -> {row, started, turn}

let socket = null;
let audio = null; // {context, stream, source, worklet}
let playhead = 0; // AudioContext time where the next chunk starts
const playing = new Set();

const $ = (id) => document.getElementById(id);

// -- connection --------------------------------------------------------------------------

async function start() {
  if (socket) return;
  clearError();
  setState("connecting", "Connecting…");
  $("start").disabled = true;
  try {
    audio = await openAudio();
  } catch (error) {
    fail(microphoneProblem(error));
    await stop();
    return;
  }
  const url = new URL("ws", location.href);
  url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
  // One conversation per tab: reconnecting (to any worker) continues it.
  let conversation = sessionStorage.getItem("conversation");
  if (!conversation) {
    conversation = `tab-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;
    sessionStorage.setItem("conversation", conversation);
  }
  url.searchParams.set("conversation", conversation);
  socket = new WebSocket(url);
  socket.binaryType = "arraybuffer";
  socket.onmessage = (message) => {
    if (typeof message.data === "string") onEvent(JSON.parse(message.data));
    else onAudio(message.data);
  };
  socket.onclose = (close) => {
    const stopping = stats.state === "stopping";
    const wasLive = stats.state === "live" || stopping;
    socket = null;
    if (stats.state !== "failed" && stats.state !== "stopped") {
      if (close.code === 1000 || close.code === 1001) {
        setState("stopped", stopping ? "Stopped" : wasLive ? "Conversation ended" : "Not connected");
      } else {
        fail(closeProblem(close.code, wasLive));
      }
    }
    stop();
  };
  audio.worklet.port.onmessage = (message) => {
    if (!socket || socket.readyState !== WebSocket.OPEN || stats.state !== "live") return;
    socket.send(message.data);
    stats.bytesSent += message.data.byteLength;
    stats.framesSent += 1;
    updateMeter();
  };
  $("stop").disabled = false;
}

// Stop: the microphone and playback end now; the socket stays open until the server has sent
// the final outcome of every call still running and closed it, so the timeline ends true.
async function stop() {
  if (socket && socket.readyState === WebSocket.OPEN && stats.state === "live") {
    setState("stopping", "Finishing running calls…");
    socket.send(JSON.stringify({ type: "stop" }));
    const closing = socket;
    setTimeout(() => closing.readyState === WebSocket.CLOSED || closing.close(1000, "user stopped"), STOP_WAIT_MS);
    $("stop").disabled = true;
    closeAudio();
    return;
  }
  if (socket) {
    setState("stopped", "Stopped");
    socket.close(1000, "user stopped");
    socket = null;
  }
  await closeAudio();
  $("start").disabled = false;
  $("stop").disabled = true;
}

async function closeAudio() {
  if (audio) {
    audio.stream.getTracks().forEach((track) => track.stop());
    audio.source.disconnect();
    audio.worklet.disconnect();
    stopPlayback();
    const context = audio.context;
    audio = null;
    await context.close();
  }
}

async function openAudio() {
  const stream = await navigator.mediaDevices.getUserMedia({
    audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true, autoGainControl: true },
  });
  const context = new AudioContext({ latencyHint: "interactive" });
  await context.audioWorklet.addModule("mic-worklet.js");
  const source = context.createMediaStreamSource(stream);
  const worklet = new AudioWorkletNode(context, "mic-capture", {
    numberOfInputs: 1,
    numberOfOutputs: 0,
    channelCount: 1,
    channelCountMode: "explicit",
  });
  source.connect(worklet);
  if (context.state === "suspended") await context.resume();
  return { context, stream, source, worklet };
}

// -- the model's audio -------------------------------------------------------------------

function onAudio(data) {
  stats.bytesReceived += data.byteLength;
  stats.chunksReceived += 1;
  updateMeter();
  if (!audio) return;
  const pcm = new Int16Array(data, 0, data.byteLength >> 1);
  const buffer = audio.context.createBuffer(1, pcm.length, OUTPUT_RATE);
  const samples = buffer.getChannelData(0);
  for (let i = 0; i < pcm.length; i++) samples[i] = pcm[i] / 0x8000;
  const node = audio.context.createBufferSource();
  node.buffer = buffer;
  node.connect(audio.context.destination);
  // Back to back: each chunk starts exactly where the previous one ends.
  const now = audio.context.currentTime;
  if (playhead < now) playhead = now + PLAYBACK_LEAD;
  node.start(playhead);
  playhead += buffer.duration;
  playing.add(node);
  node.onended = () => {
    if (playing.delete(node)) {
      stats.chunksPlayed += 1;
      updateMeter();
    }
  };
}

function stopPlayback() {
  for (const node of playing) {
    playing.delete(node);
    node.onended = null;
    try {
      node.stop();
    } catch (_) {
      // never started: nothing to stop
    }
  }
  playhead = 0;
}

// -- events ------------------------------------------------------------------------------

function onEvent(message) {
  switch (message.type) {
    case "ready":
      setState("live", "Listening");
      showBackend(message);
      break;
    case "input_transcript":
      say("user", message.text, message.turn);
      break;
    case "output_transcript":
      say("agent", message.text, message.turn);
      break;
    case "tool_started":
      callStarted(message);
      break;
    case "tool_settled":
      callSettled(message);
      break;
    case "interrupted":
      stats.interruptions += 1;
      stopPlayback();
      markInterrupted(message.turn);
      break;
    case "turn_complete":
      stats.turnsCompleted += 1;
      break;
    case "notice":
      setState(stats.state, message.message);
      break;
    case "error":
      stats.errors.push(message);
      if (message.code === "bad_input") console.warn(message.message);
      else fail(message.message);
      break;
    case "closed":
      setState("stopped", stats.state === "stopping" ? "Stopped" : "Conversation ended");
      break;
  }
  updateMeter();
}

function say(who, text, turn) {
  const list = $("transcript");
  const last = list.lastElementChild;
  if (last && last.dataset.who === who && last.dataset.turn === String(turn)) {
    last.textContent += (who === "agent" ? " " : "") + text;
  } else {
    const line = document.createElement("li");
    line.className = who;
    line.dataset.who = who;
    line.dataset.turn = String(turn);
    line.textContent = text;
    list.append(line);
  }
  list.scrollTop = list.scrollHeight;
}

function markInterrupted(turn) {
  const lines = $("transcript").querySelectorAll(`li.agent[data-turn="${turn}"]`);
  if (lines.length) lines[lines.length - 1].classList.add("interrupted");
}

// -- the tool-call timeline --------------------------------------------------------------

const TIMELINE_SECONDS = 3; // the width of a turn's track

function turnSection(turn) {
  let entry = turns.get(turn);
  if (!entry) {
    const section = document.createElement("div");
    section.className = "turn";
    section.dataset.turn = String(turn);
    const title = document.createElement("h3");
    title.textContent = `Turn ${turns.size + 1}`; // numbered as shown: turns without calls skip no number
    section.append(title);
    $("timeline").prepend(section);
    entry = { section, began: performance.now(), calls: [] };
    turns.set(turn, entry);
  }
  return entry;
}

function callStarted(message) {
  stats.callsStarted += 1;
  const entry = turnSection(message.turn);
  const row = document.createElement("div");
  row.className = "call running";
  row.dataset.id = message.id;
  const name = document.createElement("span");
  name.className = "name";
  name.textContent = message.name;
  const args = document.createElement("small");
  args.textContent = ` ${formatArgs(message.args)}${message.behavior === "NON_BLOCKING" ? " · async" : ""}`;
  name.append(args);
  const track = document.createElement("span");
  track.className = "track";
  const bar = document.createElement("span");
  bar.className = "bar";
  const offset = (performance.now() - entry.began) / 1000;
  bar.style.left = `${Math.min(98, (offset / TIMELINE_SECONDS) * 100)}%`;
  bar.style.width = "30%";
  track.append(bar);
  const outcome = document.createElement("span");
  outcome.className = "outcome";
  outcome.textContent = "running";
  row.append(name, track, outcome);
  entry.section.append(row);
  const call = { id: message.id, name: message.name, outcome: null, latency: null };
  entry.calls.push(call);
  calls.set(message.id, { row, bar, outcome, call });
}

function callSettled(message) {
  stats.callsSettled += 1;
  const known = calls.get(message.id);
  if (!known) return;
  known.call.outcome = message.outcome;
  known.call.latency = message.latency;
  known.row.className = `call ${message.outcome}`;
  const width = Math.max(1, (message.latency / TIMELINE_SECONDS) * 100);
  known.bar.style.width = `${Math.min(100, width)}%`;
  const millis = Math.round(message.latency * 1000);
  known.outcome.textContent = `${message.outcome} · ${millis} ms`;
  if (message.error && message.error.message) known.row.title = message.error.message;
}

function formatArgs(args) {
  if (!args || typeof args !== "object") return "";
  const parts = Object.entries(args).map(([key, value]) => `${key}=${JSON.stringify(value)}`);
  return `(${parts.join(", ")})`;
}

// The model behind the page, and an "emulator" badge when the server runs offline.
function showBackend(message) {
  const badge = document.getElementById("backend");
  badge.hidden = false;
  badge.textContent = message.emulator ? "emulator" : `${message.vendor} · ${message.model}`;
  badge.className = message.emulator ? "badge emulator" : "badge";
  badge.title = `${message.vendor} · ${message.model}${message.emulator ? " (offline emulator)" : ""}`;
}

// -- plain-words status and errors -------------------------------------------------------

function microphoneProblem(error) {
  if (error && error.name === "NotAllowedError") {
    return "The microphone is blocked. Allow microphone access for this page, then press Start.";
  }
  if (error && error.name === "NotFoundError") {
    return "No microphone was found. Plug one in, then press Start.";
  }
  return `The microphone could not be opened (${error && error.message ? error.message : error}).`;
}

function closeProblem(code, wasLive) {
  if (code === 1006) {
    return wasLive
      ? "The connection to the server was lost. Check that it is still running, then press Start."
      : "Could not reach the server. Check that it is running, then press Start.";
  }
  if (code === 1009) return "The server refused a message that was too large and hung up.";
  if (code === 1013) return "The server is busy. Please try again in a minute.";
  if (code === 1011) return "The server could not keep the conversation going. Press Start to try again.";
  return `The connection closed unexpectedly (code ${code}). Press Start to try again.`;
}

function fail(text) {
  stats.state = "failed";
  setState("failed", "Disconnected");
  const box = $("error");
  if (box.hidden || !box.textContent) box.textContent = text;
  box.hidden = false;
}

function clearError() {
  $("error").hidden = true;
  $("error").textContent = "";
}

function setState(state, label) {
  stats.state = state;
  const status = $("status");
  status.className = `status ${state}`;
  status.textContent = label;
}

function updateMeter() {
  const kb = (bytes) => Math.round(bytes / 1024);
  $("meter").textContent =
    `sent ${kb(stats.bytesSent)} KB · received ${kb(stats.bytesReceived)} KB · ` +
    `played ${stats.chunksPlayed} chunks · ${stats.callsSettled}/${stats.callsStarted} calls settled`;
}

$("start").addEventListener("click", start);
$("stop").addEventListener("click", stop);

// For tests and the console: counters, and every turn's calls with their outcomes.
window.voiceAgent = {
  stats,
  start,
  stop,
  turns: () =>
    [...turns.entries()].map(([turn, entry]) => ({
      turn,
      calls: entry.calls.map((call) => ({ ...call })),
    })),
};
