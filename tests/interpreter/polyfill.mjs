// aws-local-stepfunctions 3.x declares Node >= 22 for Promise.withResolvers (ES2024). The tests run the Node 22 that
// `npm ci` installs (tests/conftest.py); this stands in only on a machine where it did not (a Node < 22 on PATH).
if (typeof Promise.withResolvers !== 'function') {
  Promise.withResolvers = function withResolvers() {
    let resolve;
    let reject;
    const promise = new this((res, rej) => {
      resolve = res;
      reject = rej;
    });
    return { promise, resolve, reject };
  };
}
