// Runs one small definition on aws-local-stepfunctions; every Task answers {"item": input} or, for an input
// listed in `fail_on`, throws `Probe.Failed`. Prints {"status", "error", "cause", "calls"} (the Task inputs seen).
import './polyfill.mjs'; // before the package: it needs Promise.withResolvers

const { StateMachine } = await import('aws-local-stepfunctions');
const doc = JSON.parse(process.argv[2]);
const calls = [];
const task = async (input) => {
  calls.push(input);
  await new Promise((resolve) => setTimeout(resolve, 20));
  if ((doc.fail_on || []).some((v) => JSON.stringify(v) === JSON.stringify(input))) {
    const error = new Error('probe failure');
    error.name = 'Probe.Failed';
    throw error;
  }
  return { item: input };
};
const handlers = Object.fromEntries(doc.tasks.map((name) => [name, task]));
const execution = new StateMachine(doc.definition).run(doc.input, { overrides: { taskResourceLocalHandlers: handlers } });
let out;
try {
  await execution.result;
  out = { status: 'SUCCEEDED' };
} catch (error) {
  const cause = error.cause ?? error;
  out = { status: 'FAILED', error: cause.name, cause: cause.message };
}
await new Promise((resolve) => setTimeout(resolve, 200)); // iterations still being started after a failure
process.stdout.write(JSON.stringify({ ...out, calls }) + '\n');
process.exit(0);
