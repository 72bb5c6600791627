import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.Base64;

import org.apache.kafka.common.utils.Exit;

/**
 * Runs Kafka's command-line tools (kafka-topics, kafka-configs, ...) one after
 * another inside one JVM, so a test pays the JVM's start-up once, not per call.
 *
 * Each tool is started exactly as bin/kafka-run-class.sh starts it: its main
 * class with the user's arguments. What differs is only the process boundary:
 * stdin, stdout and stderr are swapped for buffers around each call; an exit
 * (Kafka's Exit.exit, or System.exit through a security manager) ends the
 * call with its code instead of ending the JVM, and the shutdown hooks the
 * call registered run when it ends, as they would at the JVM's exit.
 *
 * Protocol, one line per call on stdin: base64 fields separated by spaces:
 * MAIN_CLASS STDIN ARG... ; answer on the real stdout, one line:
 * "EXIT code base64(stdout) base64(stderr)".
 */
public final class ToolRunner {
    /** Thrown by the exit procedure so a tool's Exit.exit(code) ends only the call. */
    static final class ToolExit extends RuntimeException {
        final int code;

        ToolExit(int code) {
            super(null, null, false, false);
            this.code = code;
        }
    }

    /** Output the call made before its first Exit.exit: all a real process would have printed. */
    private static ByteArrayOutputStream out;
    private static ByteArrayOutputStream err;
    private static Integer exitCode;
    private static int outAtExit;
    private static int errAtExit;
    private static final List<Runnable> hooks = new ArrayList<>();
    private static final PrintStream DISCARD = new PrintStream(OutputStream.nullOutputStream());

    /**
     * A real Exit.exit ends the process on the spot. Some tools call it inside
     * a catch-all block (TopicCommand catches Throwable and exits again with
     * 1), so the first call's code and the output up to it are what count.
     */
    private static void exit(int code) {
        if (exitCode == null) {
            exitCode = code;
            outAtExit = out.size();
            errAtExit = err.size();
            System.setOut(DISCARD);
            System.setErr(DISCARD);
        }
        throw new ToolExit(code);
    }

    public static void main(String[] args) throws Exception {
        PrintStream realOut = System.out;
        PrintStream realErr = System.err;
        InputStream realIn = System.in;
        Exit.setExitProcedure((code, message) -> exit(code));
        Exit.setHaltProcedure((code, message) -> exit(code));
        // A tool's shutdown hooks run when its call ends, as at a real JVM's exit
        // (VerifiableProducer prints its summary from one).
        Exit.setShutdownHookAdder((name, runnable) -> hooks.add(runnable));
        interceptSystemExit();
        Base64.Decoder decoder = Base64.getDecoder();
        Base64.Encoder encoder = Base64.getEncoder();
        BufferedReader requests = new BufferedReader(new InputStreamReader(realIn, StandardCharsets.UTF_8));
        realOut.println("READY");
        realOut.flush();
        String line;
        while ((line = requests.readLine()) != null) {
            String[] fields = line.split(" ", -1);
            String[] decoded = new String[fields.length];
            for (int i = 0; i < fields.length; i++) {
                decoded[i] = new String(decoder.decode(fields[i]), StandardCharsets.UTF_8);
            }
            out = new ByteArrayOutputStream();
            err = new ByteArrayOutputStream();
            exitCode = null;
            PrintStream capturedOut = new PrintStream(out, true, StandardCharsets.UTF_8);
            PrintStream capturedErr = new PrintStream(err, true, StandardCharsets.UTF_8);
            System.setIn(new ByteArrayInputStream(decoded[1].getBytes(StandardCharsets.UTF_8)));
            System.setOut(capturedOut);
            System.setErr(capturedErr);
            Set<Thread> before = new HashSet<>(runtimeHooks().keySet());
            int code = run(decoded[0], Arrays.copyOfRange(decoded, 2, decoded.length), capturedErr);
            if (exitCode != null) {
                // What the tool did after its Exit.exit would never have run.
                code = exitCode;
                out = truncated(out, outAtExit);
                err = truncated(err, errAtExit);
                System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
                System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
            }
            runHooks(before);
            System.out.flush();
            System.err.flush();
            byte[] stdout = out.toByteArray();
            byte[] stderr = err.toByteArray();
            System.setIn(realIn);
            System.setOut(realOut);
            System.setErr(realErr);
            realOut.println("EXIT " + code + " " + encoder.encodeToString(stdout)
                + " " + encoder.encodeToString(stderr));
            realOut.flush();
        }
        leaving = true;
        System.exit(0);  // tools may leave non-daemon threads behind
    }

    private static ByteArrayOutputStream truncated(ByteArrayOutputStream buffer, int size) {
        ByteArrayOutputStream kept = new ByteArrayOutputStream();
        kept.write(buffer.toByteArray(), 0, size);
        return kept;
    }

    /**
     * Some tools call System.exit and Runtime.addShutdownHook directly
     * (VerifiableProducer prints its last events from such a hook): the
     * security manager turns the first into a ToolExit, and hooks added during
     * a call are taken back and run when it ends.
     */
    @SuppressWarnings("removal")
    private static void interceptSystemExit() {
        System.setSecurityManager(new SecurityManager() {
            @Override
            public void checkPermission(java.security.Permission perm) {
            }

            @Override
            public void checkPermission(java.security.Permission perm, Object context) {
            }

            @Override
            public void checkExit(int status) {
                if (!leaving) {
                    exit(status);
                }
            }
        });
    }

    private static volatile boolean leaving;

    @SuppressWarnings("unchecked")
    private static Map<Thread, Thread> runtimeHooks() {
        try {
            Field field = Class.forName("java.lang.ApplicationShutdownHooks").getDeclaredField("hooks");
            field.setAccessible(true);
            return (Map<Thread, Thread>) field.get(null);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("run the runner with --add-opens java.base/java.lang=ALL-UNNAMED", e);
        }
    }

    private static void runHooks(Set<Thread> before) {
        List<Runnable> registered = new ArrayList<>(hooks);
        hooks.clear();
        Map<Thread, Thread> runtime = runtimeHooks();
        List<Thread> added;
        synchronized (Class.class) {
            added = new ArrayList<>(runtime.keySet());
        }
        added.removeAll(before);
        for (Thread hook : added) {
            Runtime.getRuntime().removeShutdownHook(hook);
            registered.add(hook::run);
        }
        for (Runnable hook : registered) {
            try {
                hook.run();
            } catch (RuntimeException e) {
                e.printStackTrace();
            }
        }
    }

    /** The exit code the tool's own JVM would have ended with. */
    private static int run(String mainClass, String[] args, PrintStream err) {
        try {
            Method main = Class.forName(mainClass).getMethod("main", String[].class);
            main.invoke(null, (Object) args);
            return 0;
        } catch (InvocationTargetException e) {
            Throwable cause = e.getCause();
            if (cause instanceof ToolExit) {
                return ((ToolExit) cause).code;
            }
            // An exception escaping main: the JVM prints it and exits with 1.
            err.print("Exception in thread \"main\" ");
            cause.printStackTrace(err);
            return 1;
        } catch (ReflectiveOperationException e) {
            e.printStackTrace(err);
            return 127;
        }
    }
}
