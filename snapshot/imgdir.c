/*
 * imgdir.c - where a snapshot may write its image (see imgdir.h).
 *
 * The check runs on the directory descriptor the image is then created through, so a
 * path swapped between the check and the creation changes nothing: what is checked is
 * what is written to.
 */
#include "imgdir.h"
#include "image.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Whether @dir lies beneath one of @dirs: 0, or -EACCES with the list in @err. */
static int imgdir_allowed(const struct snap_image_dir *dirs, int n_dirs, int dir,
			  const char *file, char *err, size_t errlen)
{
	int n;

	if (!n_dirs)
		return 0;
	for (int i = 0; i < n_dirs; i++)
		if (img_dir_beneath(dir, dirs[i].dev, dirs[i].ino))
			return 0;
	n = snprintf(err, errlen, "%s is outside the image directories (", file);
	for (int i = 0; i < n_dirs && n > 0 && (size_t)n < errlen; i++)
		n += snprintf(err + n, errlen - (size_t)n, "%s%s", i ? ", " : "", dirs[i].name);
	if (n > 0 && (size_t)n < errlen)
		snprintf(err + n, errlen - (size_t)n, "); start ccvm with --image-dir DIR to allow "
			 "another");
	return -EACCES;
}

int imgdir_open(const struct snap_image_dir *dirs, int n, const char *file, char *err,
		size_t errlen)
{
	const char *base;
	int dir = img_dir_open(file, &base), rc;

	if (dir < 0) {
		snprintf(err, errlen, "cannot create the image %s: %s", file,
			 dir == -EISDIR ? "that names a directory, not a file" : strerror(-dir));
		return dir;
	}
	rc = imgdir_allowed(dirs, n, dir, file, err, errlen);
	if (rc) {
		close(dir);
		return rc;
	}
	return dir;
}
