/*
 * version.h - ccvm's version (`ccvm --version`, the man page). The snapshot image
 * format has its own version (snapshot/image.h), printed beside it.
 */
#ifndef CCVM_VERSION_H
#define CCVM_VERSION_H

#define CCVM_VERSION "0.1.0"

#endif
