// Linux event APIs Glibc's Swift module does not export.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sys/socket.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <netinet/tcp.h>

/// accept4 with SOCK_NONBLOCK | SOCK_CLOEXEC (a GNU extension).
static inline int atoll_accept_nonblocking(int fd) {
    return accept4(fd, 0, 0, SOCK_NONBLOCK | SOCK_CLOEXEC);
}
