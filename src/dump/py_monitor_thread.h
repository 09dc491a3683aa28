/* The monitor's helper thread itself (py_monitor_thread.c): a queue of work
 * run in order, and work shared with the calling thread. No Python. */
#ifndef MSP_PY_MONITOR_THREAD_H
#define MSP_PY_MONITOR_THREAD_H

/* Queue fn(arg) to run on the helper thread after what was queued before,
 * starting the thread if need be: 0, or -1 when there is no helper thread
 * or no room (nothing queued). */
int msp_mon_thread_queue(void (*fn)(void *), void *arg);
/* 1 when the helper thread runs (it may hold queued work). */
int msp_mon_thread_started(void);
/* 1 when no helper thread could be started (the work is the caller's). */
int msp_mon_thread_failed(void);
/* Wait until the helper thread has run everything queued. */
void msp_mon_thread_join(void);
/* work(arg, i) for every i in [0, n), by the calling thread and the helper
 * thread together (the helper joining when it is free, ahead of its queue;
 * the calling thread alone when there is no helper): returns when all are
 * done. The caller never waits for the helper's other work. */
void msp_mon_thread_split(void (*work)(void *arg, int i), void *arg, int n);

#endif
