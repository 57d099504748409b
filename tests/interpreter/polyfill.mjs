// aws-local-stepfunctions 3.x declares Node >= 22 for Promise.withResolvers (ES2024); Node 20 lacks it.
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
