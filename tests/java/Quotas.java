// tests/broker/test_client_quotas.py: Admin.describeClientQuotas, unfiltered and for one user.
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.quota.*;
import java.util.*;
public class Quotas {
  public static void main(String[] a) throws Exception {
    Properties p = new Properties();
    p.put("bootstrap.servers", a[0]);
    try (Admin ad = Admin.create(p)) {
      System.out.println("ALL " + ad.describeClientQuotas(ClientQuotaFilter.all()).entities().get());
      System.out.println("ALICE " + ad.describeClientQuotas(ClientQuotaFilter.containsOnly(
          List.of(ClientQuotaFilterComponent.ofEntity("user", "alice")))).entities().get());
    }
  }
}
