package client

// ReasonTooManyWatches (429): a file watch of a sandbox that has as many open
// as it may (GET …/files/watch); one must close first.
const ReasonTooManyWatches = "too_many_watches"
