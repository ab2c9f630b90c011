import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;

/**
 * Prints what DatabaseMetaData answers for the tables of one schema: getTables, getColumns,
 * getPrimaryKeys and getIndexInfo, one line per row (columns separated by '|'), each call headed
 * by its name; a call that fails prints its SQLSTATE and message.
 *
 * <p>Usage: CatalogProbe URL USER SCHEMA TABLE
 */
public final class CatalogProbe {
  public static void main(String[] args) throws Exception {
    String url = args[0], user = args[1], schema = args[2], table = args[3];
    try (Connection conn = DriverManager.getConnection(url, user, "")) {
      DatabaseMetaData md = conn.getMetaData();
      call("getTables", () -> md.getTables(null, schema, "%", new String[] {"TABLE", "VIEW"}));
      call("getColumns", () -> md.getColumns(null, schema, "%", "%"));
      call("getPrimaryKeys", () -> md.getPrimaryKeys(null, schema, table));
      call("getIndexInfo", () -> md.getIndexInfo(null, schema, table, false, false));
    }
  }

  interface Query {
    ResultSet run() throws SQLException;
  }

  static void call(String name, Query query) {
    System.out.println("## " + name);
    try (ResultSet rs = query.run()) {
      ResultSetMetaData meta = rs.getMetaData();
      StringBuilder head = new StringBuilder();
      for (int i = 1; i <= meta.getColumnCount(); i++) {
        head.append(i > 1 ? "|" : "").append(meta.getColumnLabel(i));
      }
      System.out.println(head);
      while (rs.next()) {
        StringBuilder row = new StringBuilder();
        for (int i = 1; i <= meta.getColumnCount(); i++) {
          row.append(i > 1 ? "|" : "").append(rs.getString(i));
        }
        System.out.println(row);
      }
    } catch (SQLException e) {
      System.out.println("ERROR " + e.getSQLState() + " " + e.getMessage().split("\n")[0]);
    }
  }
}
