// Issue 99: a comment that cites the tracker instead of the reason.
int x;
