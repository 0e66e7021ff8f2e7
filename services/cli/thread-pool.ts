/**
 * libuv's thread pool runs every asynchronous file operation and the callback form of crypto (the signature of
 * an AS2 MDN). Node's default of 4 threads can run out where flushes are slow and the machine busy: each O_DSYNC
 * append and each fsync holds a thread for the device's whole flush, and signatures and reads queue behind them
 * (docs/benchmarks.md, "AS2 on another machine": no difference on a quiet machine, better in every pair of a busy
 * one). Idle threads cost no CPU. libuv reads UV_THREADPOOL_SIZE once, when the pool first starts, so this module
 * runs before any other: main.ts imports it first. An operator's own setting wins.
 */
export const DEFAULT_THREADPOOL_SIZE = 16;

if (!process.env.UV_THREADPOOL_SIZE) process.env.UV_THREADPOOL_SIZE = String(DEFAULT_THREADPOOL_SIZE);
