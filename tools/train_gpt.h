// tools/train_gpt.h — torc-train --model gpt (train_gpt.c): a GPT-2 trained on token files.
#ifndef TORC_TRAIN_GPT_H
#define TORC_TRAIN_GPT_H

#include "train_args.h"

// Trains as o says (o->model is "gpt", o->data set) and prints the progress and the summary;
// returns the exit status (0), or exits with 1 and a message on any error.
int train_gpt(const train_options *o);

#endif
