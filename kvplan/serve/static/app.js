// The page: the form's fields are the URL's query (a link shares a plan) and the API's query; the answer is
// /api/estimate/working, which the server computes. Nothing here does arithmetic on memory.
"use strict";

const $ = (id) => document.getElementById(id);
const form = () => $("plan");
const SEGMENTS = [
  ["weights", "weights_bytes", "#4c6ef5"], ["activation", "activation_bytes", "#ae3ec9"],
  ["non-torch", "non_torch_bytes", "#f59f00"], ["CUDA graphs", "cuda_graph_bytes", "#15aabf"],
  ["reserve", "reserve_bytes", "#868e96"], ["KV pool", "kv_cache_bytes", "#2f9e44"],
];
const GiB = 2 ** 30;
const n = (value) => Number(value).toLocaleString("en-US");
const gib = (bytes) => (bytes / GiB).toFixed(2) + " GiB";
const times = (value) => Number(value).toFixed(2) + "x"; // concurrency, as the CLI prints it

function fields() {
  return Array.from(form().elements).filter((el) => el.name);
}

let extras = new URLSearchParams(); // a deep link's flags the form has no field for: kept, not dropped

function query() {
  const params = new URLSearchParams(extras);
  for (const el of fields()) {
    const value = el.value.trim();
    if (value) params.set(el.name, value);
  }
  return params;
}

// The GPUs a deployment takes, as the CLI counts them (Deployment.gpu_count): TP x PP x DP; an answer's own
// count (gpu.count) replaces it, so a pasted command's split is counted too.
const SPLIT = ["tensor-parallel-size", "pipeline-parallel-size", "data-parallel-size"];

function showCount(count) {
  $("gpu-count").textContent = count + (count === 1 ? " GPU" : " GPUs");
}

function countGpus() {
  const sizes = SPLIT.map((id) => $(id).value.trim()).map((text) => (text ? Number(text) : 1));
  const whole = sizes.every((size) => Number.isInteger(size) && size >= 1);
  showCount(whole ? sizes.reduce((product, size) => product * size, 1) : "?");
}

function ensureOption(select, value) {
  if (!Array.from(select.options).some((o) => o.value === value)) {
    select.add(new Option(value, value));
  }
}

function fill(params) {
  for (const el of fields()) {
    const value = params.get(el.name);
    if (value === null) continue;
    if (el.tagName === "SELECT") ensureOption(el, value);
    el.value = value;
  }
}

function cell(row, text, className) {
  const td = row.insertCell();
  td.textContent = text;
  if (className) td.className = className;
  return td;
}

function copyButton(text, label) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "copy";
  button.textContent = "Copy";
  button.setAttribute("aria-label", label);
  button.addEventListener("click", () => copy(text));
  return button;
}

async function copy(text) {
  try {
    await navigator.clipboard.writeText(text);
    $("status").textContent = "Copied: " + text;
  } catch (err) {
    $("status").textContent = "Copy was refused by the browser; select the text instead: " + text;
  }
}

function drawBar(memory) {
  const svg = $("bar");
  const ns = "http://www.w3.org/2000/svg";
  svg.querySelectorAll("rect").forEach((r) => r.remove());
  const legend = $("legend");
  legend.textContent = "";
  const used = SEGMENTS.reduce((sum, [, key]) => sum + Math.max(memory[key], 0), 0);
  const total = Math.max(memory.total_bytes, used, 1);
  let x = 0;
  const parts = [];
  for (const [label, key, colour] of SEGMENTS) {
    const value = memory[key];
    if (value <= 0 && key !== "kv_cache_bytes") continue;
    const width = (Math.max(value, 0) / total) * 600;
    const rect = document.createElementNS(ns, "rect");
    rect.setAttribute("x", x); rect.setAttribute("y", 0);
    rect.setAttribute("width", width); rect.setAttribute("height", 28);
    rect.setAttribute("fill", colour);
    const title = document.createElementNS(ns, "title");
    title.textContent = label + " " + gib(value);
    rect.appendChild(title);
    svg.appendChild(rect);
    x += width;
    parts.push([label, value, colour]);
  }
  const unused = memory.total_bytes - used;
  parts.push([unused >= 0 ? "unused" : "over the GPU by", Math.abs(unused), "#e9ecef"]);
  for (const [label, value, colour] of parts) {
    const li = document.createElement("li");
    const swatch = document.createElement("span");
    swatch.className = "swatch";
    swatch.style.background = colour;
    swatch.setAttribute("aria-hidden", "true");
    li.append(swatch, label + " " + gib(value));
    legend.appendChild(li);
  }
  $("bar-title").textContent = "GPU memory, " + gib(memory.total_bytes) + ": " +
    parts.map(([label, value]) => label + " " + gib(value)).join(", ");
}

function render(answer, params) {
  const doc = Array.isArray(answer.estimate) ? answer.estimate[0] : answer.estimate;
  const working = answer.working[0];
  const cap = doc.capacity;
  const eng = doc.engine;
  $("headline").textContent = doc.model.id + " on " + doc.gpu.count + "x " + doc.gpu.name + " · " + eng.name +
    (eng.version ? " " + eng.version : "") + " · TP " + doc.parallel.tensor + " PP " + doc.parallel.pipeline;
  drawBar(doc.memory);
  showCount(doc.gpu.count);
  $("blocks").textContent = n(cap.num_blocks) + " blocks of " + eng.block_size + " tokens (" + n(doc.kv.block_bytes) + " B)";
  $("tokens").textContent = n(cap.tokens);
  $("concurrency").textContent = times(cap.max_concurrency) + " at " + n(eng.max_model_len) + " tokens per request";
  $("longest").textContent = n(cap.max_model_len_that_fits) + " tokens for one request";
  $("formula").textContent = working.formula;
  $("pool").textContent = working.pool;
  $("knobs").textContent = working.knobs;
  const verdict = $("verdict");
  verdict.textContent = doc.error || ("Serves: one request of " + n(eng.max_model_len) + " tokens fits.");
  verdict.className = doc.error ? "refused" : "";
  const ladder = $("ladder").tBodies[0];
  ladder.textContent = "";
  for (const rung of cap.ladder) {
    const row = ladder.insertRow();
    cell(row, n(rung.context)); cell(row, n(rung.concurrency)); cell(row, n(rung.kv_limited));
  }
  const levers = $("levers").tBodies[0];
  levers.textContent = "";
  for (const lever of doc.levers || []) {
    const row = levers.insertRow();
    const code = document.createElement("code");
    code.textContent = lever.flags;
    row.insertCell().appendChild(code);
    cell(row, n(lever.tokens)); cell(row, times(lever.max_concurrency));
    cell(row, lever.fits ? "yes" : "no", lever.fits ? "fits-yes" : "fits-no");
    const flags = lever.flags.replace(/ \(.*\)$/, ""); // "--quantization awq (with a 4-bit checkpoint)"
    row.insertCell().appendChild(copyButton(flags, "Copy " + flags));
  }
  $("levers-box").hidden = !(doc.levers || []).length;
  const notes = $("notes");
  notes.textContent = "";
  for (const note of doc.notes) {
    const li = document.createElement("li");
    li.textContent = note;
    notes.appendChild(li);
  }
  $("cli").textContent = answer.command;
  $("json-link").href = "/api/estimate?" + params.toString();
  $("answer").hidden = false;
  $("status").textContent = n(cap.tokens) + " KV tokens, " + times(cap.max_concurrency) + " concurrency" +
    (doc.error ? "; the engine would refuse to start." : ".");
}

function showError(body) {
  const box = $("error");
  const field = body.field || "";
  box.textContent = (field ? field + ": " : "") + body.error;
  box.hidden = false;
  $("answer").hidden = true;
  $("status").textContent = "The estimate failed.";
  const input = fields().find((el) => el.name === field || el.name === field.replace(/_/g, "-"));
  if (input) {
    input.setAttribute("aria-invalid", "true");
    input.setAttribute("aria-describedby", "error");
    input.focus();
  }
}

async function run(params) {
  const result = $("result");
  result.setAttribute("aria-busy", "true");
  $("error").hidden = true;
  fields().forEach((el) => { el.removeAttribute("aria-invalid"); el.removeAttribute("aria-describedby"); });
  $("status").textContent = "Estimating…";
  try {
    const response = await fetch("/api/estimate/working?" + params.toString());
    const body = await response.json();
    if (response.ok) render(body, params); else showError(body);
  } catch (err) {
    showError({ error: "the server did not answer: " + err, field: null });
  } finally {
    result.setAttribute("aria-busy", "false");
  }
}

async function catalogues() {
  const [gpus, models] = await Promise.all([fetch("/api/gpus"), fetch("/api/models")].map(
    (p) => p.then((r) => (r.ok ? r.json() : [])).catch(() => [])));
  const select = $("gpu");
  for (const gpu of gpus) {
    select.add(new Option(gpu.name + " (" + gib(gpu.memory_bytes) + ")", gpu.id));
  }
  const list = $("models");
  for (const model of models) {
    const option = document.createElement("option");
    option.value = model.id;
    list.appendChild(option);
  }
}

async function start() {
  await catalogues();
  const params = new URLSearchParams(location.search);
  fill(params);
  SPLIT.forEach((id) => $(id).addEventListener("input", countGpus));
  countGpus();
  const named = new Set(fields().map((el) => el.name));
  extras = new URLSearchParams(Array.from(params).filter(([key]) => !named.has(key)));
  document.querySelector("button.copy[data-copy=cli]").addEventListener("click", () => copy($("cli").textContent));
  form().addEventListener("submit", (event) => {
    event.preventDefault();
    const wanted = query();
    history.replaceState(null, "", "?" + wanted.toString());
    run(wanted);
  });
  if ((params.get("model") || params.get("command")) && (params.get("gpu") || params.get("gpu-memory"))) {
    run(params);
  }
}

document.addEventListener("DOMContentLoaded", start);
