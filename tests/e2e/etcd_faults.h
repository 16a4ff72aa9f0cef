/*
 * etcd_faults.h - allocation faults for the etcd source under test: forced
 * into every file of etcd_driver_faults (-include), it routes the module's
 * malloc/calloc/realloc through counters the driver arms ("fail-alloc N":
 * the Nth allocation from now returns NULL, once). cJSON's and the
 * library's own allocations are not counted. Test builds only.
 */
#ifndef GW_ETCD_FAULTS_H
#define GW_ETCD_FAULTS_H

#include <stdlib.h>
#include <string.h>

void *etcd_fault_malloc(size_t n);
void *etcd_fault_calloc(size_t n, size_t size);
void *etcd_fault_realloc(void *p, size_t n);

#define malloc(n) etcd_fault_malloc(n)
#define calloc(n, s) etcd_fault_calloc(n, s)
#define realloc(p, n) etcd_fault_realloc(p, n)

#endif /* GW_ETCD_FAULTS_H */
