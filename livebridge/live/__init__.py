"""Internal: the session the app holds (``livebridge.LiveSession``) and the actor that runs it
(``session``), its options, the table that picks a vendor's connector (``vendors``), and the
exchange reader. It sits above the vendors, the store and the recording, and wraps a connector in
them."""
