// Linux event APIs Glibc's Swift module does not export.
#include <sys/socket.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <netinet/tcp.h>
#include <pthread.h>

// accept4 and pthread_setname_np are declared only under _GNU_SOURCE, and defining that here
// changes other structures (fd_set) from what the other C modules of the program see: declare
// them alone.
extern int accept4(int fd, struct sockaddr *address, socklen_t *length, int flags);
extern int pthread_setname_np(pthread_t thread, const char *name);

/// accept4 with SOCK_NONBLOCK | SOCK_CLOEXEC.
static inline int atoll_accept_nonblocking(int fd) {
    return accept4(fd, 0, 0, SOCK_NONBLOCK | SOCK_CLOEXEC);
}
