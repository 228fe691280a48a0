/* A file named like a communicator plugin that is not one (it exports no rvl_collectives_entry):
 * ravel-info must list it with the reason and still list everything else. */
int ravel_not_a_communicator(void) { return 0; }
