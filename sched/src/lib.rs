//! rpmd per-core run loop (work not started yet).
//!
//! This crate will hold the lcore run loop: pinned worker threads running
//! tasks, backlog drain until empty or quota, adaptive busy-poll with a spin
//! budget that falls back to sleeping on eventfds, yielding when co-scheduled
//! work exists, per-lcore telemetry, and the dequeue-prioritised lock that
//! fronts shared TX queues.
#![deny(missing_docs)]
#![deny(unsafe_code)]
