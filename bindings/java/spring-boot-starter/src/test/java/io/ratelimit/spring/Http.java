package io.ratelimit.spring;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;

/** A plain HTTP client for the apps under test (headers as name, value pairs). */
final class Http {
    private final HttpClient client = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
    private final int port;

    Http(int port) {
        this.port = port;
    }

    HttpResponse<String> get(String path, String... headers) throws Exception {
        return send(path, headers).get();
    }

    CompletableFuture<HttpResponse<String>> send(String path, String... headers) {
        // a hang guard, not a speed bound (as AsyncTest's HANG): at 20 s a
        // request timed out once on a machine at load 8
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
                .timeout(Duration.ofSeconds(60));
        for (int i = 0; i + 1 < headers.length; i += 2) {
            b.header(headers[i], headers[i + 1]);
        }
        return client.sendAsync(b.build(), HttpResponse.BodyHandlers.ofString());
    }

    static String header(HttpResponse<?> res, String name) {
        return res.headers().firstValue(name).orElseThrow(() -> new AssertionError("no " + name + " in "
                + res.statusCode() + " " + res.headers().map()));
    }
}
