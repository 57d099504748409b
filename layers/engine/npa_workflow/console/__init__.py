"""The web console (`npa-workflow console`, and `serve`'s own): runs, a run's graph, timeline, decisions, logs and
cost, live by server-sent events; cancel and resume on a stack. See docs/operating.md ("The web console")."""
