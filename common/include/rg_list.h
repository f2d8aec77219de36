/*
 * An intrusive circular doubly-linked list: a node is embedded in its owner,
 * and RG_CONTAINER_OF gets the owner back. A head is a node linked to itself
 * when empty; a node taken out is linked to itself too, so removing it again
 * is harmless. No locking: the owner's rules say who may touch a list.
 */
#ifndef RG_LIST_H
#define RG_LIST_H

#include <stddef.h>

typedef struct rg_list {
	struct rg_list *prev, *next;
} rg_list;

#define RG_CONTAINER_OF(p, type, field) ((type *)((char *)(p)-offsetof(type, field)))

static inline void rg_list_init(rg_list *h) { h->prev = h->next = h; }

static inline int rg_list_empty(const rg_list *h) { return h->next == h; }

/* A node is in some list (as one taken out or just initialised is not). */
static inline int rg_list_linked(const rg_list *n) { return n->next != n; }

static inline void rg_list_add_tail(rg_list *h, rg_list *n)
{
	n->prev = h->prev;
	n->next = h;
	h->prev->next = n;
	h->prev = n;
}

static inline void rg_list_del(rg_list *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	rg_list_init(n);
}

#endif
