package io.ratelimit;

/** What the core's rl_permit holds once acquired; built by the JNI layer. */
final class NativePermit {
    final String id;
    final long fencingToken;
    final long leaseMs;

    NativePermit(String id, long fencingToken, long leaseMs) {
        this.id = id;
        this.fencingToken = fencingToken;
        this.leaseMs = leaseMs;
    }
}
