package io.ratelimit.spring;

import static io.ratelimit.spring.Http.header;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.ratelimit.RedisServer;
import java.io.File;
import java.net.URL;
import java.net.URLClassLoader;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.boot.SpringApplication;
import org.springframework.context.ConfigurableApplicationContext;

/** The minimal app of docs/spring.md, compiled from the doc and run against a real Redis over HTTP. */
class DocsAppTest {
    @TempDir
    Path dir;

    @Test
    void theDocumentedAppRunsAsDocumented() throws Exception {
        Path src = dir.resolve("com/example/demo/DemoApplication.java");
        Files.createDirectories(src.getParent());
        Files.writeString(src, block(docs(), "DemoApplication.java"));
        String classpath = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        assertEquals(0, javac.run(null, null, null, "-parameters", "-cp", classpath, "-d", dir.toString(),
                src.toString()), "the doc's app does not compile");

        ClassLoader previous = Thread.currentThread().getContextClassLoader();
        try (RedisServer redis = RedisServer.start();
                URLClassLoader loader = new URLClassLoader(new URL[] {dir.toUri().toURL()}, getClass().getClassLoader())) {
            Thread.currentThread().setContextClassLoader(loader);
            // the doc's application.properties, with this test's Redis and a free port
            ConfigurableApplicationContext ctx = SpringApplication.run(loader.loadClass("com.example.demo.DemoApplication"),
                    "--server.port=0", "--ratelimit.url=" + redis.url() + "/0", "--ratelimit.prefix=demo");
            try {
                Http http = new Http(ctx.getEnvironment().getRequiredProperty("local.server.port", Integer.class));
                for (int i = 0; i < 3; i++) {
                    HttpResponse<String> ok = http.get("/hello/alice");
                    assertEquals(200, ok.statusCode());
                    assertEquals("hello alice\n", ok.body());
                    assertEquals("\"hello\";q=3;w=60", header(ok, "RateLimit-Policy"));
                }
                HttpResponse<String> denied = http.get("/hello/alice");
                assertEquals(429, denied.statusCode());
                assertEquals("20", header(denied, "Retry-After"));
                assertEquals("\"hello\";r=0;t=60", header(denied, "RateLimit"));
                assertEquals("Too Many Requests", denied.body());
                assertEquals(List.of("demo:{hello:alice}:gcra"), redis.keys());
            } finally {
                ctx.close();
            }
        } finally {
            Thread.currentThread().setContextClassLoader(previous);
        }
    }

    /** docs/spring.md, found by walking up from the module directory. */
    private static String docs() throws Exception {
        for (File d = new File("").getAbsoluteFile(); d != null; d = d.getParentFile()) {
            File f = new File(d, "docs/spring.md");
            if (f.isFile()) {
                return Files.readString(f.toPath());
            }
        }
        throw new AssertionError("docs/spring.md not found above " + new File("").getAbsolutePath());
    }

    /** The fenced block after {@code <!-- spring-app: NAME -->}. */
    private static String block(String doc, String name) {
        Matcher m = Pattern.compile("<!-- spring-app: " + Pattern.quote(name) + " -->\\n```java\\n(.*?)```",
                Pattern.DOTALL).matcher(doc);
        assertTrue(m.find(), "no block marked spring-app: " + name);
        return m.group(1);
    }
}
