/*
 * merge.h - one full image equal to a chain of incremental images (snapshot/merge.c).
 */
#ifndef CCVM_MERGE_H
#define CCVM_MERGE_H

#include "image.h"

/*
 * img_merge - write @out as a full image holding what restoring @child would: every
 * chunk of the chain (each checked), @child's sections, compressed with @child's codec
 * and level. @out is written under a temporary name and renamed when complete; it may
 * not be an image of the chain. Returns 0 or -errno with a message in @err.
 */
int img_merge(const char *child, const char *out, char err[IMG_ERR_LEN]);

#endif
