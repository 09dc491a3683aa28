/* Steps that lost records to a failed write (dump_lost.c), for the writer
 * thread (dump_writer.c). No Python. */
#ifndef MSP_DUMP_LOST_H
#define MSP_DUMP_LOST_H

#include <stdint.h>

/* The writer thread's record of steps that lost records to a failed write
 * (dump_lost.c): step lost one record or more (dropped: no file for it at
 * all); said once, as ranges, at shutdown. Writer thread only. */
void msp_dq_note_lost(int64_t step, int dropped);
void msp_dq_say_lost(void);

#endif
