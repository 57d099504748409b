// Runs one compiled state machine on aws-local-stepfunctions (an ASL interpreter independent of moto) and
// answers its Lambda Tasks through the Python bridge (alsf_bridge.py), which calls the project's real handlers.
//
// Protocol: one JSON document per line. The bridge writes to our stdin, we write to our stdout (nothing else
// may print there).
//   bridge → harness  {"type":"start","definition","input","context","token_placeholder"}
//                     {"type":"result","id","ok":true,"payload"} | {"type":"result","id","ok":false,"error":{Lambda error body}}
//                     {"type":"callback","id","action":"success"|"failure"|"heartbeat","token","output","error","cause"}
//   harness → bridge  {"type":"invoke","id","state","function","payload","wait"}
//                     {"type":"callback_ack","id","accepted","code"}
//                     {"type":"end","status","error","cause","events"}
//
// What stands in for the Step Functions service here, and why:
// - `.waitForTaskToken`: the interpreter has no callback service; a Task override resolves when the interpreter
//   should move on. Each attempt gets its own token (AWS mints one per attempt), the Lambda is invoked with it,
//   and the Task ends when the bridge sends SendTaskSuccess/Failure for that token (possibly before the Lambda
//   returned, as a replayed wave does).
// - `lambda:invoke`: the result is shaped as the optimized integration returns it ({"Payload", "StatusCode"});
//   a Lambda error fails the Task with the error named after `errorType` and the error body as the cause.
// - A token whose Task ended (completed, or past its TimeoutSeconds) answers `TaskTimedOut`, as AWS does.
// - HeartbeatSeconds is not interpreted by aws-local-stepfunctions: heartbeats are accepted and do nothing.

import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';

import './polyfill.mjs'; // before the package: it needs Promise.withResolvers

const { StateMachine } = await import('aws-local-stepfunctions');

const WAIT_SUFFIX = '.waitForTaskToken';
let nextId = 1;
const pendingInvokes = new Map(); // id → {resolve, reject}
const tokens = new Map(); // token → {outcome, deadline, settle}

function send(doc) {
  process.stdout.write(JSON.stringify(doc) + '\n');
}

function lambdaError(body) {
  const error = new Error(JSON.stringify(body));
  error.name = String(body.errorType || 'Lambda.Unknown');
  return error;
}

function taskFailure(errorName, cause) {
  const error = new Error(cause ?? '');
  error.name = errorName || 'States.TaskFailed';
  return error;
}

function invoke(state, fn, payload, wait) {
  const id = nextId++;
  return new Promise((resolve, reject) => {
    pendingInvokes.set(id, { resolve, reject });
    send({ type: 'invoke', id, state, function: fn, payload, wait });
  });
}

function replaceToken(value, placeholder, token) {
  if (value === placeholder) return token;
  if (Array.isArray(value)) return value.map((v) => replaceToken(v, placeholder, token));
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, replaceToken(v, placeholder, token)]));
  }
  return value;
}

/** Every Task state of the definition, nested Map processors included: name → definition. */
function taskStates(definition, found = {}) {
  for (const [name, state] of Object.entries(definition.States || {})) {
    if (state.Type === 'Task') found[name] = state;
    const processor = state.ItemProcessor || state.Iterator;
    if (processor) taskStates(processor, found);
    for (const branch of state.Branches || []) taskStates(branch, found);
  }
  return found;
}

/**
 * aws-local-stepfunctions resolves TimeoutSecondsPath against the Task's effective input (what Parameters made of
 * it); AWS resolves it against the state input. The compiled wave Tasks read `$.run.deadline` (`$.deadline` in a
 * Map item) from the state input, so for this interpreter the same path is copied into Parameters, where it
 * resolves to the same value. The Lambda payload is untouched; the bridge reads only FunctionName and Payload.
 */
function stateInputPaths(states) {
  for (const state of Object.values(states)) {
    const path = state.TimeoutSecondsPath;
    if (!path) continue;
    const keys = path.replace(/^\$\./, '').split('.');
    let node = (state.Parameters = state.Parameters || {});
    for (const key of keys.slice(0, -1)) {
      if (node[key] !== undefined && typeof node[key] !== 'object') throw new Error(`cannot mirror ${path}`);
      node = node[key] = node[key] || {};
    }
    node[`${keys.at(-1)}.$`] = path;
  }
}

function valueAt(doc, path) {
  return path.replace(/^\$\./, '').split('.').reduce((node, key) => node?.[key], doc);
}

function override(name, state, placeholder) {
  const wait = String(state.Resource).endsWith(WAIT_SUFFIX);
  return async (input) => {
    const fn = input.FunctionName;
    // The interpreter's own default is 60 s; a TimeoutSecondsPath is mirrored into `input` (stateInputPaths).
    const timeoutMs = (state.TimeoutSecondsPath ? valueAt(input, state.TimeoutSecondsPath) : state.TimeoutSeconds ?? 60) * 1000;
    if (!wait) {
      const result = await invoke(name, fn, input.Payload, false);
      if (!result.ok) throw lambdaError(result.error);
      return { ExecutedVersion: '$LATEST', Payload: result.payload, StatusCode: 200 };
    }
    const token = `alsf-${randomUUID()}`;
    const entry = { outcome: null, deadline: Date.now() + timeoutMs, settle: null };
    const outcome = new Promise((resolve) => {
      entry.settle = resolve;
    });
    tokens.set(token, entry);
    try {
      const result = await invoke(name, fn, replaceToken(input.Payload, placeholder, token), true);
      if (!result.ok) throw lambdaError(result.error);
      const done = entry.outcome ?? (await outcome);
      if (done.action === 'failure') throw taskFailure(done.error, done.cause);
      return done.output;
    } finally {
      entry.deadline = 0; // the Task is over: later callbacks are refused
    }
  };
}

function onCallback(msg) {
  const entry = tokens.get(msg.token);
  let accepted = false;
  let code = 'InvalidToken';
  if (entry) {
    if (entry.outcome === null && Date.now() < entry.deadline) {
      accepted = true;
      code = '';
      if (msg.action !== 'heartbeat') {
        entry.outcome = msg;
        entry.settle(msg);
      }
    } else {
      code = 'TaskTimedOut';
    }
  }
  send({ type: 'callback_ack', id: msg.id, accepted, code });
}

function summarize(event) {
  const doc = { type: event.type };
  if (event.state) doc.name = event.state.name;
  if (event.index !== undefined) doc.index = event.index;
  if (event.parentState) doc.parent = event.parentState.name;
  if (event.Error !== undefined) doc.error = event.Error;
  return doc;
}

async function run(start) {
  const definition = start.definition;
  const handlers = {};
  stateInputPaths(taskStates(definition));
  for (const [name, state] of Object.entries(taskStates(definition))) {
    handlers[name] = override(name, state, start.token_placeholder);
  }
  const machine = new StateMachine(definition, { validationOptions: { checkArn: true, checkPaths: true } });
  const execution = machine.run(start.input, {
    overrides: { taskResourceLocalHandlers: handlers },
    context: start.context,
  });
  const events = [];
  const collecting = (async () => {
    for await (const event of execution.eventLogs) events.push(summarize(event));
  })();
  let end;
  try {
    await execution.result;
    end = { type: 'end', status: 'SUCCEEDED' };
  } catch (error) {
    const cause = error.cause ?? error;
    end = { type: 'end', status: 'FAILED', error: cause.name, cause: cause.message, wrapper: error.name };
  }
  await collecting;
  send({ ...end, events });
}

const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  if (!line.trim()) return;
  const msg = JSON.parse(line);
  if (msg.type === 'start') {
    run(msg).catch((error) => send({ type: 'end', status: 'HARNESS_ERROR', error: error.name, cause: String(error.stack) }));
  } else if (msg.type === 'result') {
    const waiter = pendingInvokes.get(msg.id);
    pendingInvokes.delete(msg.id);
    if (waiter) waiter.resolve(msg);
  } else if (msg.type === 'callback') {
    onCallback(msg);
  }
});
// The bridge closes our stdin when it is done with the run: Map iterations the interpreter kept starting after
// a failure may still be waiting on tokens nobody will complete.
lines.on('close', () => process.exit(0));
