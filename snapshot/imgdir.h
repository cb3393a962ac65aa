/*
 * imgdir.h - where a snapshot may write its image: beneath one of a list of
 * directories, checked on the directory actually opened (imgdir.c).
 */
#ifndef CCVM_IMGDIR_H
#define CCVM_IMGDIR_H

#include <stddef.h>
#include <sys/types.h>

/* A directory images may be written to, known by device and inode (a path that
 * reaches it through links counts too), and the name to show. */
#define SNAP_MAX_IMAGE_DIRS 72
struct snap_image_dir {
	dev_t dev;
	ino_t ino;
	const char *name;
};

/* Open the directory @file is to be created in, once: its descriptor, or -errno with
 * a message in @err (-EACCES when it lies beneath none of the @n @dirs; n == 0 allows
 * any directory). */
int imgdir_open(const struct snap_image_dir *dirs, int n, const char *file, char *err,
		size_t errlen);

#endif
