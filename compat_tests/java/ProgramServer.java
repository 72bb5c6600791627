import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.reflect.InvocationTargetException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Base64;

/**
 * Runs test programs one after another in this one JVM, for compat_tests/drivers/java.py:
 * a JVM start and kafka-clients' class loading cost 1-3 s on a loaded machine, which a
 * program run per question paid every time.
 *
 * Each line on stdin is `MAIN_CLASS ARG...`, tab-separated; the program's main runs with
 * System.out captured, and the answer is one line on stdout: `ok BASE64(what it printed)`
 * or `error BASE64(its stack trace)`. The programs it runs keep no state between runs
 * (their options are set at each main) and close every client they open.
 */
final class ProgramServer {
    private ProgramServer() {
    }

    public static void main(String[] args) throws Exception {
        PrintStream answers = System.out;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.split("\t", -1);
            ByteArrayOutputStream printed = new ByteArrayOutputStream();
            String answer;
            System.setOut(new PrintStream(printed, true, StandardCharsets.UTF_8));
            try {
                Class.forName(words[0]).getMethod("main", String[].class)
                    .invoke(null, (Object) Arrays.copyOfRange(words, 1, words.length));
                System.out.flush();
                answer = "ok " + base64(printed.toByteArray());
            } catch (InvocationTargetException e) {
                answer = "error " + base64(trace(e.getCause()));
            } catch (Throwable e) {
                answer = "error " + base64(trace(e));
            } finally {
                System.setOut(answers);
            }
            answers.println(answer);
            answers.flush();
        }
    }

    private static byte[] trace(Throwable e) {
        StringWriter text = new StringWriter();
        e.printStackTrace(new PrintWriter(text));
        return text.toString().getBytes(StandardCharsets.UTF_8);
    }

    private static String base64(byte[] bytes) {
        return Base64.getEncoder().encodeToString(bytes);
    }
}
