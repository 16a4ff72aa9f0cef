/* switchyard.c - the command-line tool (placeholder until `check` lands). */
#include <stdio.h>

#include "switchyard.h"

int main(void) {
    printf("switchyard %s\n", sy_version());
    return 0;
}
