/* placeholder: being written — tirctl's real main replaces this file. */
#include <stdio.h>

int main(void)
{
	fprintf(stderr, "tirctl: not built yet\n");
	return 2;
}
