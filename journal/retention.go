package journal

// cleanupBatch is how many rows one cleanup statement deletes, so retention
// never holds long locks or writes a huge transaction.
const cleanupBatch = 5000

// Cleaned counts what a cleanup removed.
type Cleaned struct {
	// Events are done events deleted with everything recorded about them;
	// their keys are forgotten, so a resend would be a new event.
	Events int
	// Payloads are bodies and headers dropped from done events that are
	// still kept for deduplication.
	Payloads int
}
