/*
 * sandbox.c - what a guest must not be able to do in ccvm (run only under ccvm; the
 * expected answers differ from a native run by design).
 * Usage: sandbox RWDIR [PATH...]   (prints one "name: result" line per probe; each
 * PATH is then opened for reading and reported)
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static const char *err_name(int e)
{
	switch (e) {
	case 0: return "ok";
	case EROFS: return "EROFS";
	case EACCES: return "EACCES";
	case ENOENT: return "ENOENT";
	case EFAULT: return "EFAULT";
	case ENOSYS: return "ENOSYS";
	case EXDEV: return "EXDEV";
	case ELOOP: return "ELOOP";
	case EPERM: return "EPERM";
	default: return strerror(e);
	}
}

static void report(const char *name, long rc)
{
	printf("%s: %s\n", name, rc < 0 ? err_name(errno) : "ok");
}

int main(int argc, char **argv)
{
	char path[600];
	int fd;

	if (argc < 2)
		return 2;
	/* Writes outside the --rw directories are refused, reads are fine. */
	fd = open("/etc/ccvm-sandbox-probe", O_CREAT | O_WRONLY, 0644);
	report("create in /etc", fd);
	report("open /etc/hostname for writing", open("/etc/hostname", O_WRONLY));
	report("mkdir in /", mkdir("/ccvm-sandbox-probe", 0755));
	report("unlink /etc/hostname", unlink("/etc/hostname"));
	report("read /etc/hostname", open("/etc/hostname", O_RDONLY));
	/* Inside the writable directory everything works. */
	snprintf(path, sizeof(path), "%s/probe.txt", argv[1]);
	fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	report("create in rw dir", fd);
	report("write in rw dir", fd < 0 ? -1 : write(fd, "x", 1));
	/* A symlink in the rw dir pointing out of it does not make the target writable. */
	snprintf(path, sizeof(path), "%s/escape", argv[1]);
	symlink("/etc/hostname", path);
	report("write through symlink out of rw dir", open(path, O_WRONLY));
	unlink(path);
	/* A hard link cannot bring a read-only file into the rw dir. */
	report("hard link /etc/hostname into rw dir", link("/etc/hostname", path));
	/* The monitor's own process files are not the guest's. */
	report("open /proc/self/mem", open("/proc/self/mem", O_RDONLY));
	report("open /proc/self/environ", open("/proc/self/environ", O_RDONLY));
	report("open /dev/kvm", open("/dev/kvm", O_RDWR));
	report("open /dev/null for writing", open("/dev/null", O_WRONLY));
	/* Pointers outside guest RAM, or into the system area, fault. */
	report("write from NULL+16", syscall(SYS_write, 1, 16L, 8L));
	report("write from the page tables", syscall(SYS_write, 1, 0x10000L, 8L));
	report("read into the stub area", syscall(SYS_read, 0, 0x200000L, 8L));
	report("write from far beyond RAM", syscall(SYS_write, 1, 0x7fff00000000L, 8L));
	report("stat with a wild path pointer", syscall(SYS_stat, 0x7fff00000000L, 0x7fff00001000L));
	/* Unknown system calls say ENOSYS. */
	report("syscall 451", syscall(451));
	report("syscall 451 again", syscall(451));
	/* Only the VM's own processes can be signalled: pid 1 is none of them. */
	report("kill pid 1", kill(1, 0));
	for (int i = 2; i < argc; i++) {
		snprintf(path, sizeof(path), "open %s", argv[i]);
		report(path, open(argv[i], O_RDONLY));
	}
	return 0;
}
